"""Pages that fit the screen, at 1440×900 and 1280×800, on SWE-bench-like data (long ids,
long ties, 13 candidates): the batch page's triage columns, the group page's narrow
density, sticky file names and advantages table, and the exports panel with a long error."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import rollout
from tests.webapp.annotationdata import grade, save
from tests.webapp.reviewdata import MESSAGES, file_patch, import_batch
from webapp.models import Export, Group
from webapp.roles import RESEARCHER
from webapp.triage import triage_refresh

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = [(1440, 900), (1280, 800)]
BIG = "django__django-11099"
OTHERS = ("astropy__astropy-12907", "scikit-learn__scikit-learn-13142", "sympy__sympy-20590",
          "matplotlib__matplotlib-23314", "pytest-dev__pytest-5221")
LONG_LINE = "        raise ValidationError(" + ", ".join(f"'message_{i}'" for i in range(30)) + ")  # END-OF-LINE"


def tid(i: int) -> str:
    return f"sweagent__claude-3-5-sonnet-20241022__run-{i:02d}"


def fix(extra: int = 0, long_line: bool = False) -> str:
    """A fix of the validators, with `extra` lines of a new test file."""
    added = ["    regex = r'^[\\w.@+-]+\\Z'"] + ([LONG_LINE] if long_line else [])
    patch = file_patch("django/contrib/auth/validators.py", added, ["    regex = r'^[\\w.@+-]+$'"], start=10)
    if extra:
        patch += file_patch("tests/auth_tests/test_validators.py",
                            [f"    def test_case_{i}(self):  # a long test file" for i in range(extra)], new=True)
    return patch


@pytest.fixture
def swebench(tmp_path):
    """BIG: 13 trajectories, run-01..06 the same fix (the grader ties them on top), 07..09 with a
    long new test file (its one hunk open), 10 and 11 with a long line, 12 and 13 failing; odd runs have a transcript.
    OTHERS: four trajectories each, all tied on top. A researcher ranked BIG otherwise."""
    records = []
    for i in range(1, 14):
        patch = fix() if i <= 6 else fix(extra=55) if i <= 9 else fix(long_line=True)
        extra = {"messages": MESSAGES} if i % 2 else {}
        records.append(rollout(BIG, tid(i), 1.0 if i <= 11 else 0.0, patch=patch,
                               metrics={"num_turns": 20 + i, "output_tokens": 9000 + i}, **extra))
    records[0]["task"] = {"id": BIG, "statement": "Username validators allow a trailing newline.",
                          "repo": "django/django", "base_commit": "d" * 40}
    for name in OTHERS:
        group = [rollout(name, tid(i), 1.0, patch=fix(extra=i)) for i in range(1, 5)]
        group[0]["task"] = {"id": name, "statement": "Fix it.", "repo": name.split("__")[0] + "/" + name.split("__")[0],
                            "base_commit": "e" * 40}
        records += group
    batch = import_batch(tmp_path, records, name="swe-bench-verified/claude-3-5-sonnet/sweagent")
    rita = make_user("rita", RESEARCHER)
    big = Group.objects.get(batch=batch, group_id=BIG)
    flags = {tid(1): ["edits_tests"], tid(7): ["out_of_scope_changes", "unnecessary_complexity"],
             tid(10): ["debug_leftovers"]}
    grade(big, tiers=[[tid(i) for i in range(1, 7)], [tid(7), tid(8), tid(9)], [tid(10)], [tid(11)]],
          flags=flags, rationales={})
    for group in Group.objects.filter(batch=batch).exclude(group_id=BIG):
        grade(group, tiers=[[tid(i) for i in range(1, 5)]], flags={}, rationales={})
    triage_refresh(Group.objects.filter(batch=batch).values_list("pk", flat=True))
    save(big, rita, [[tid(7)], [tid(i) for i in range(1, 7)], [tid(8), tid(9), tid(10), tid(11)]],
         flags={tid(8): ["reward_hacking"]})
    return batch


def box(page, selector: str) -> dict:
    return page.locator(selector).first.evaluate(
        "e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, "
        "bottom: r.bottom, width: r.width, height: r.height}; }")


def page_width(page) -> dict:
    return page.evaluate("() => ({scroll: document.documentElement.scrollWidth, viewport: window.innerWidth})")


@pytest.fixture
def rita_page(page, live_server, swebench):
    login(page, live_server, "rita", PASSWORD)
    return page


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_the_batch_pages_triage_columns_fit_the_screen(rita_page, live_server, swebench, width, height):
    page = rita_page
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/batches/{swebench.pk}/")
    row = page.locator("tr", has=page.locator("a", has_text=BIG))
    expect(row.locator(".tie-more summary")).to_have_text("+3 more")
    # the top pick's flag under it; the group's other flags apart
    expect(row.locator("td.triage-top .badge.flag")).to_have_text(["edits_tests"])
    expect(row.locator("td.triage-flags .badge.flag")).to_have_text(
        ["reward_hacking", "out_of_scope_changes", "debug_leftovers", "unnecessary_complexity"])
    expect(row.locator("td.triage-lines")).to_contain_text("shortest")
    for expand in (False, True):
        if expand:
            row.locator(".tie-more summary").click()
            expect(row.locator(".tie-more")).to_contain_text(tid(6))
        last = box(page, "table.groups-table thead th:last-child")
        wrap = page.locator(".table-wrap").evaluate("e => ({scroll: e.scrollWidth, client: e.clientWidth})")
        assert last["right"] <= width and wrap["scroll"] <= wrap["client"], (last, wrap)
        assert page_width(page)["scroll"] <= width
    expect(page.locator("table.groups-table thead th:last-child")).to_have_text("Review")
    screenshot(page, f"fit-01-batch-{width}", full_page=True)
    assert not page.watch.errors


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_narrow_columns_fit_more_of_them_and_cut_no_code(rita_page, live_server, swebench, width, height):
    page = rita_page
    page.set_viewport_size({"width": width, "height": height})
    big = Group.objects.get(batch=swebench, group_id=BIG)

    def whole_columns() -> int:
        return page.evaluate("""() => {
            const wrap = document.getElementById('group-view').getBoundingClientRect();
            return [...document.querySelectorAll('tr.m-ids th.col')].map(th => th.getBoundingClientRect())
                .filter(r => r.left >= wrap.left && r.right <= wrap.right + 0.5).length;
        }""")

    page.goto(f"{live_server.url}/groups/{big.pk}/?density=compact")
    ready(page)
    compact = whole_columns()
    page.click("#toggle-narrow")
    page.wait_for_url("**density=narrow**")
    ready(page)
    narrow = whole_columns()
    assert narrow > compact and narrow >= 5, (narrow, compact)
    assert page_width(page)["scroll"] <= width
    cut = page.evaluate("""() => [...document.querySelectorAll('#group-view pre.code')]
        .filter(pre => pre.scrollWidth > pre.clientWidth + 1).length""")
    assert cut == 0
    spilled = page.evaluate("""() => [...document.querySelectorAll('#group-view td.col, #group-view th.col')]
        .filter(cell => cell.scrollWidth > cell.clientWidth + 1).map(cell => cell.textContent.slice(0, 60))""")
    assert spilled == []
    page.locator(".toolbar").evaluate("e => e.scrollIntoView()")
    screenshot(page, f"fit-02-narrow-{width}")
    assert not page.watch.errors


def test_file_names_and_heads_stay_in_view_while_a_long_file_scrolls(rita_page, live_server, swebench):
    page = rita_page
    page.set_viewport_size({"width": 1440, "height": 900})
    big = Group.objects.get(batch=swebench, group_id=BIG)
    page.goto(f"{live_server.url}/groups/{big.pk}/?density=narrow")
    ready(page)
    row = page.locator("tr.file-row", has_text="tests/auth_tests/test_validators.py")
    for button in row.locator(".cap-toggle").all():  # a long file's cells stop at half the window until asked
        button.click()
    # the matrix at the top of the window, scrolled 300 px into the long test file's row
    page.locator("#group-view").evaluate("""wrap => {
        wrap.scrollIntoView({block: 'start'});
        const row = [...wrap.querySelectorAll('tr.file-row')].find(r => r.textContent.includes('test_validators'));
        wrap.scrollTop += row.getBoundingClientRect().top - wrap.getBoundingClientRect().top + 300;
    }""")
    head = box(page, "#group-view tr.m-ids th.corner")  # the heads' cells stick, not their row
    wrap = box(page, "#group-view")
    row_box = row.evaluate("e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; }")
    assert row_box["top"] < head["bottom"] - 100, "the row's top has not scrolled under the column heads"
    name = row.locator("th.path .mono").evaluate("e => { const r = e.getBoundingClientRect(); "
                                                 "return {top: r.top, bottom: r.bottom}; }")
    assert head["bottom"] - 1 <= name["top"] and name["bottom"] <= wrap["bottom"], (name, head)
    cell_head = row.locator("td.col .file-head").first.evaluate(
        "e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; }")
    assert head["bottom"] - 1 <= cell_head["top"] < head["bottom"] + 20, (cell_head, head)
    screenshot(page, "fit-03-sticky-file-names")
    assert not page.watch.errors


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_the_advantages_table_shows_its_delta_column(rita_page, live_server, swebench, width, height):
    page = rita_page
    page.set_viewport_size({"width": width, "height": height})
    big = Group.objects.get(batch=swebench, group_id=BIG)
    page.goto(f"{live_server.url}/groups/{big.pk}/")
    ready(page)
    delta = box(page, ".rk-adv thead th:last-child")
    preview = box(page, ".rk-preview")
    assert page.locator(".rk-adv thead th:last-child").inner_text() == "Δ"
    assert delta["width"] > 10 and delta["right"] <= preview["right"] and preview["right"] <= width, (delta, preview)
    clipped = page.locator(".rk-adv").evaluate("t => t.closest('.rk-preview').scrollWidth > "
                                               "t.closest('.rk-preview').clientWidth + 1")
    assert not clipped
    page.locator(".rk-preview").scroll_into_view_if_needed()
    screenshot(page, f"fit-04-advantages-{width}")
    assert not page.watch.errors


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_a_failed_exports_long_message_wraps_and_downloads_stay_in_view(rita_page, live_server, swebench, width,
                                                                         height):
    page = rita_page
    page.set_viewport_size({"width": width, "height": height})
    refused = ("The SFT export needs a rationale for every passing trajectory; missing in "
               + ", ".join(f"{name}/{tid(i)}" for name in OTHERS for i in range(1, 5))
               + " /srv/gagar/var/exports/" + "x" * 300)
    Export.objects.create(batch=swebench, kind=Export.Kind.SFT, format="jsonl", status="failed",
                          error=refused)
    done = Export.objects.create(batch=swebench, kind=Export.Kind.ADVANTAGES, format="parquet",
                                 status="done", rows_done=31, rows_total=31,
                                 files=[{"name": "advantages.parquet", "bytes": 20480, "sha256": "0" * 64},
                                        {"name": "manifest.json", "bytes": 900, "sha256": "1" * 64}])
    page.goto(f"{live_server.url}/batches/{swebench.pk}/")
    page.click("#exports > summary")
    link = page.locator(f"#export-{done.pk} a", has_text="advantages.parquet")
    expect(link).to_be_visible()
    error = page.locator(".export-error pre").first
    short = error.evaluate("e => e.getBoundingClientRect().height")
    assert box(page, f"#export-{done.pk} .export-files a")["right"] <= width
    assert page_width(page)["scroll"] <= width
    assert short < 100, short  # a few lines, not the whole message
    screenshot(page, f"fit-05-exports-{width}", full_page=True)
    page.locator(".export-error summary").first.click()
    expect(error).to_contain_text("x" * 50)
    whole = error.evaluate("e => ({height: e.getBoundingClientRect().height, right: e.getBoundingClientRect().right,"
                           " scroll: e.scrollHeight, client: e.clientHeight})")
    assert whole["height"] > short and whole["scroll"] <= whole["client"] + 1 and whole["right"] <= width, whole
    assert box(page, f"#export-{done.pk} .export-files a")["right"] <= width
    assert not page.watch.errors
