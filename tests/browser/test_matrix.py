"""The matrix at a glance in a real browser: compact columns at 1440 px, a pinned column that
stays in view, the reference column, long lines that scroll or wrap, "hide failing" counts;
the ranking editor with long ids and flags; a cancelled grading run on the panel."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import rollout
from tests.webapp.annotationdata import grade, pk_of
from tests.webapp.reviewdata import file_patch, import_batch
from webapp.models import Group
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

N_PASSING, N_FAILING = 11, 3
LONG_END = "END_OF_THE_LONG_LINE"
LONG_LINE = "    value = compute(" + ", ".join(f"argument_{i}" for i in range(60)) + f")  # {LONG_END}"
REFERENCE = (file_patch("pkg/mod.py", ["    return x + 1"], ["    return x"], start=2)
             + file_patch("docs/changelog.md", ["- f adds one"], new=True))


def tid(i: int) -> str:
    return f"sweagent__claude-3-5-sonnet-20241022__run-{i:02d}"


@pytest.fixture
def group(tmp_path):
    """14 trajectories with long ids, 11 passing: run-02 adds a line far wider than a column,
    every third adds a file of its own; the grader ranks them in reverse and flags five."""
    records = []
    for i in range(1, N_PASSING + N_FAILING + 1):
        added = [f"    return x + {i}"] + ([LONG_LINE] if i == 2 else [])
        patch = file_patch("pkg/mod.py", added, ["    return x"], start=2)
        if i % 3 == 0:
            patch += file_patch(f"pkg/extra_{i}.py", [f"EXTRA = {i}"], new=True)
        records.append(rollout("long-ids", tid(i), 1.0 if i <= N_PASSING else 0.0, patch=patch,
                               metrics={"num_turns": 10 + i, "output_tokens": 1000 * i}))
    records[0]["task"] = {"id": "long-ids", "statement": "Make f add one.", "repo": "o/r",
                          "base_commit": "b" * 40, "reference_patch": REFERENCE}
    group = Group.objects.get(batch=import_batch(tmp_path, records, name="long"))
    flags = {tid(i): ["debug_leftovers", "unnecessary_complexity"] for i in (1, 3, 5)}
    flags.update({tid(2): ["out_of_scope_changes"], tid(7): ["edits_tests", "incomplete", "other"]})
    grade(group, tiers=[[tid(i)] for i in range(N_PASSING, 0, -1)], flags=flags, rationales={})
    return group


@pytest.fixture
def researcher_page(page, live_server):
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    return page


def open_group(page, live_server, group, query=""):
    page.goto(f"{live_server.url}/groups/{group.pk}/{query}")
    ready(page)


def show_matrix(page):
    page.locator(".toolbar").evaluate("e => e.scrollIntoView()")


def test_the_matrix_at_a_glance(researcher_page, live_server, group):
    page = researcher_page
    page.set_viewport_size({"width": 1440, "height": 900})
    open_group(page, live_server, group)
    # the grader's order, best first, then failing
    heads = page.locator("tr.m-ids th.col .tid").all_inner_texts()
    assert heads[:3] == [tid(11), tid(10), tid(9)] and heads[-3:] == [tid(12), tid(13), tid(14)]
    expect(page.locator("#column-order")).to_contain_text("the final ranking (the grader's)")

    # Compact: at least four whole columns beside the file column, and no sideways page scroll.
    page.click("#toggle-compact")
    page.wait_for_url("**density=compact**")
    fit = page.evaluate("""() => {
        const wrap = document.getElementById('group-view').getBoundingClientRect();
        const cols = [...document.querySelectorAll('tr.m-ids th.col')].map(th => th.getBoundingClientRect());
        return {whole: cols.filter(r => r.left >= wrap.left && r.right <= wrap.right).length,
                page: document.documentElement.scrollWidth, viewport: window.innerWidth};
    }""")
    assert fit["whole"] >= 4 and fit["page"] <= fit["viewport"], fit
    ids_whole = page.evaluate("""() => [...document.querySelectorAll('tr.m-ids th.col .tid')]
        .every(e => e.scrollWidth <= e.clientWidth && e.textContent.endsWith(e.title.slice(-6)))""")
    assert ids_whole
    show_matrix(page)
    screenshot(page, "matrix-01-compact-1440")

    # Pin run-04: it comes first and stays in view when the matrix scrolls sideways.
    page.locator(f"#t-{pk_of(group, tid(4))} .pin-link").click()
    page.wait_for_url(f"**pin={pk_of(group, tid(4))}**")
    assert page.locator("tr.m-ids th.col .tid").first.inner_text() == tid(4)
    page.locator("#group-view").evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    pinned = page.evaluate("""() => {
        const wrap = document.getElementById('group-view').getBoundingClientRect();
        const file = document.querySelector('th.corner').getBoundingClientRect();
        const th = document.querySelector('th.col.pinned').getBoundingClientRect();
        return {left: th.left, file_right: file.right, wrap_left: wrap.left,
                scrolled: document.getElementById('group-view').scrollLeft};
    }""")
    assert pinned["scrolled"] > 1000 and abs(pinned["left"] - pinned["file_right"]) < 2, pinned
    show_matrix(page)
    screenshot(page, "matrix-02-pinned-scrolled")

    # The reference column, beside the pinned one, with the same diff view and a file of its own.
    page.locator("#group-view").evaluate("e => { e.scrollLeft = 0; }")
    page.click("#toggle-reference")
    page.wait_for_url("**ref=1**")
    expect(page.locator("#reference-column")).to_contain_text("reference (human fix)")
    expect(page.locator("#reference-column")).to_contain_text("not ranked")
    assert page.locator("tr.m-ids th.col .tid").nth(1).inner_text() == "reference (human fix)"
    expect(page.locator("tr.file-row", has_text="docs/changelog.md").locator("td.col.ref .ln.add")).to_have_count(1)
    show_matrix(page)
    screenshot(page, "matrix-03-reference-column")

    # Hide failing: the corner counts what is left.
    corner = page.locator("#matrix-counts")
    # pkg/mod.py, the reference's docs/changelog.md and four extra_N.py, of which extra_12.py is a failing one's
    expect(corner.locator(".count-all")).to_have_text("6 files · 14 trajectories")
    expect(corner.locator(".count-passing")).to_be_hidden()
    page.keyboard.press("f")
    expect(corner.locator(".count-passing")).to_contain_text("5 files · 11 passing trajectories")
    expect(corner.locator(".count-all")).to_be_hidden()
    # the layout's links and the column picker keep "hide failing" from now on
    assert "failing=hide" in page.locator("#toggle-wrap").get_attribute("href")
    assert page.locator('.column-form input[name="failing"]').get_attribute("value") == "hide"
    assert not page.locator("th.col.fail").first.is_visible()
    assert not page.watch.errors


def test_a_long_line_scrolls_inside_its_hunk_or_wraps(researcher_page, live_server, group):
    page = researcher_page
    page.set_viewport_size({"width": 1440, "height": 900})
    open_group(page, live_server, group, "?density=wide")  # a 1440 px window picks narrow columns, which wrap
    cell = page.locator(f"tr.file-row td.col:nth-child({1 + 10})")  # run-02 is tenth in the grader's order
    assert page.locator("tr.m-ids th.col").nth(9).locator(".tid").inner_text() == tid(2)
    pre = cell.locator("pre.code").first
    pre.scroll_into_view_if_needed()
    box = pre.evaluate("""pre => ({scroll: pre.scrollWidth, client: pre.clientWidth,
                                   overflow: getComputedStyle(pre).overflowX,
                                   cell: pre.closest('td').getBoundingClientRect().width})""")
    assert box["scroll"] > box["client"] + 500 and box["overflow"] in ("auto", "scroll"), box
    assert box["cell"] < 470, box  # the column keeps its width: the hunk scrolls, not the table
    pre.evaluate("pre => { pre.scrollLeft = pre.scrollWidth; }")
    assert end_visible(pre), "the end of the long line is not reachable by scrolling the hunk"
    screenshot(page, "matrix-04-long-line-scrolled")

    page.click("#toggle-wrap")
    page.wait_for_url("**wrap=1**")
    pre = page.locator(f"tr.file-row td.col:nth-child({1 + 10}) pre.code").first
    pre.scroll_into_view_if_needed()
    wrapped = pre.evaluate("pre => ({scroll: pre.scrollWidth, client: pre.clientWidth})")
    assert wrapped["scroll"] <= wrapped["client"], wrapped
    assert end_visible(pre), "the end of the wrapped line is not in view"
    screenshot(page, "matrix-05-long-line-wrapped")
    assert not page.watch.errors


def end_visible(pre) -> bool:
    """Whether the last characters of the long line lie inside the hunk's visible box."""
    return pre.evaluate(f"""pre => {{
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        let node;
        while ((node = walker.nextNode()) && !node.textContent.includes('{LONG_END}')) {{}}
        if (!node) return false;
        const range = document.createRange();
        const at = node.textContent.indexOf('{LONG_END}');
        range.setStart(node, at); range.setEnd(node, at + {len(LONG_END)});
        const r = range.getBoundingClientRect(), box = pre.getBoundingClientRect();
        return r.width > 0 && r.left >= box.left - 1 && r.right <= box.right + 1;
    }}""")


@pytest.mark.parametrize("width", [1440, 1024])
def test_the_ranking_editor_shows_long_ids_whole_beside_flags(researcher_page, live_server, group, width):
    page = researcher_page
    page.set_viewport_size({"width": width, "height": 1000})
    open_group(page, live_server, group)
    page.wait_for_function("document.getElementById('rk-tiers').value !== ''")
    problems = page.evaluate("""() => {
        const out = [];
        const overlap = (a, b) => a.width && b.width && a.left < b.right - 1 && b.left < a.right - 1
                                  && a.top < b.bottom - 1 && b.top < a.bottom - 1;
        for (const item of document.querySelectorAll('.rk-item')) {
            const row = item.querySelector('.rk-row');
            const id = row.querySelector('.rk-tid');
            if (id.scrollWidth > id.clientWidth || id.textContent !== item.dataset.tid)
                out.push('cut: ' + item.dataset.tid);
            const parts = [...row.children, ...row.querySelector('.rk-main').children]
                .filter(e => e.getClientRects().length && !e.classList.contains('rk-main'))
                .flatMap(e => e.classList.contains('rk-flag-badges') ? [...e.children] : [e]);
            for (let i = 0; i < parts.length; i++) for (let j = i + 1; j < parts.length; j++) {
                if (overlap(parts[i].getBoundingClientRect(), parts[j].getBoundingClientRect()))
                    out.push(`overlap in ${item.dataset.tid}: ${parts[i].className} / ${parts[j].className}`);
            }
            if (row.scrollWidth > row.clientWidth + 1) out.push('row overflows: ' + item.dataset.tid);
        }
        return out;
    }""")
    assert problems == []
    expect(page.locator(f'.rk-item[data-tid="{tid(2)}"] .rk-grader')).to_have_text("grader #10")
    expect(page.locator(f'.rk-item[data-tid="{tid(7)}"] .badge.flag')).to_have_count(3)
    page.locator("#ranking").scroll_into_view_if_needed()
    screenshot(page, f"matrix-06-ranking-editor-{width}")
    assert not page.watch.errors


def test_a_cancelled_run_looks_cancelled_on_the_panel(researcher_page, live_server, group, monkeypatch):
    from webapp.grading.services import grading_launch
    from webapp.grading.worker import gradings_process

    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    batch = group.batch
    done = grading_launch(batch=batch, grader="heuristic", regrade=True).run
    gradings_process(grading_ids=list(done.gradings.values_list("pk", flat=True)))
    queued = grading_launch(batch=batch, grader="heuristic", regrade=True).run
    page = researcher_page
    page.goto(f"{live_server.url}/batches/{batch.pk}/grading/")
    row = page.locator(f"tr.run-running:has(input[name=run][value='{queued.pk}'])")
    expect(row.locator(".run-state")).to_have_text("running")
    screenshot(page, "matrix-07-grading-run-before-cancel")
    row.get_by_role("button", name="Cancel run").click()
    expect(page.locator("tr.run-cancelled .run-state-cancelled")).to_have_text("cancelled")
    expect(page.locator("tr.run-cancel-row")).to_contain_text("Cancelled by rita at")
    expect(page.locator("tr.run-cancel-row")).to_contain_text("1 grading not graded")
    colours = {state: page.locator(f".run-state-{state}").first.evaluate("e => getComputedStyle(e).backgroundColor")
               for state in ("cancelled", "done")}
    assert colours["cancelled"] != colours["done"], colours
    assert page.locator("button", has_text="Cancel run").count() == 0
    assert not page.watch.errors
    screenshot(page, "matrix-08-grading-run-cancelled", full_page=True)
