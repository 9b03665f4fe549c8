"""Charts and tables you can read, in Chromium at 1280×800 and 1440×900: chart text at 12 px or
more, line colours no one mistakes for each other, a step's numbers at once on hover, on a tap
and on keyboard focus; on the compare page a dash per line; the table of every number says when
more columns lie to the right; the dashboard's labels at 12 px keep the part that differs; ids
in the batch table and the advantages table wrap at their hyphens, not mid-word."""

import itertools
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.test_page_fit import BIG, VIEWPORTS, rita_page, swebench  # noqa: F401 - fixtures
from tests.django_fixtures import PASSWORD, make_user
from webapp.roles import AUDITOR, RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SEPARATORS = "-_/.:"  # a line may break after one of these in an id, nowhere else

# Each text's size as drawn: its font size times the SVG's scale on screen.
TEXT_SIZES = """svg => Array.from(svg.querySelectorAll('text')).map(t => {
  const m = t.getScreenCTM();
  return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b)];
})"""
# Where a line of an element's text ends, the character before the break and the one after.
BREAKS = """e => {
  const out = [], walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
  let text = '', tops = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (let i = 0; i < n.length; i++) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const box = r.getClientRects()[0];
      if (!box || !n.data[i].trim()) continue;
      text += n.data[i]; tops.push(box.top);
    }
  }
  for (let i = 1; i < text.length; i++) if (tops[i] > tops[i - 1] + 2) out.push(text[i - 1] + text[i]);
  return out;
}"""


def lab(rgb: str) -> tuple[float, float, float]:
    """CIE L*a*b* of a computed colour "rgb(r, g, b)"."""
    def linear(c):
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(v)) for v in re.findall(r"\d+", rgb)[:3])
    x, y, z = ((r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047, r * 0.2126 + g * 0.7152 + b * 0.0722,
               (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883)

    def f(v):
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(a: str, b: str) -> float:
    return sum((p - q) ** 2 for p, q in zip(lab(a), lab(b), strict=True)) ** 0.5


@pytest.fixture
def runs(tmp_path, monkeypatch):
    from tests.webapp.runs.rundata import make_run
    from webapp.models import Run
    from webapp.runs.services import figures_refresh

    monkeypatch.setattr("webapp.derived.send", lambda *a, **k: None)  # the figures are computed here, below
    for name, graded in (("gagar-run", True), ("grpo-run", False)):
        for batch, _ in make_run(tmp_path, name, steps=4, graded=graded, seed=len(name)).values():
            figures_refresh(batch.pk)
    make_user("rita", RESEARCHER)
    return Run.objects.get(name="gagar-run"), Run.objects.get(name="grpo-run")


def test_run_charts_read_at_12px_in_distinct_colours_with_numbers_on_hover_and_focus(page, live_server, runs):
    gagar, _ = runs
    login(page, live_server, "rita", PASSWORD)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/runs/{gagar.pk}/")
        for i in range(page.locator("svg.run-chart").count()):
            sizes = page.locator("svg.run-chart").nth(i).evaluate(TEXT_SIZES)
            small = [(text, round(size, 1)) for text, size in sizes if size < 12]
            assert not small, (width, i, small)
        strokes = page.locator("#chart-lines polyline.run-line, #chart-lines circle.run-dot").evaluate_all(
            "els => [...new Set(els.map(e => getComputedStyle(e).stroke))]")
        assert len(strokes) == 7  # seven lines, seven colours
        closest = min(delta_e(a, b) for a, b in itertools.combinations(strokes, 2))
        assert closest >= 25, (strokes, closest)
        assert page.locator("#chart-pass_rate text.run-tick-x").all_text_contents() == ["0", "1", "2", "3"]
    screenshot(page, "readable-01-run-page", full_page=True)

    tip = page.locator("#chart-tip")
    page.locator("#chart-pass_rate a[data-step='2'] rect.run-column").hover()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("step 2")
    expect(tip).to_contain_text("pass rate 0.")
    page.locator("#chart-pass_rate a[tabindex='0']").focus()  # the chart's one tab stop
    expect(tip).to_contain_text("step 0")
    page.keyboard.press("ArrowRight")
    expect(tip).to_contain_text("step 1")
    assert page.evaluate("document.activeElement.dataset.step") == "1"
    page.keyboard.press("Escape")
    expect(tip).to_be_hidden()
    assert not page.watch.errors and not page.watch.foreign_requests()


def test_a_tap_shows_a_steps_numbers_and_a_second_tap_opens_it(browser, live_server, runs):
    gagar, _ = runs
    context = browser.new_context(viewport={"width": 1280, "height": 800}, has_touch=True, is_mobile=True)
    page = context.new_page()
    login(page, live_server, "rita", PASSWORD)
    url = f"{live_server.url}/runs/{gagar.pk}/"
    page.goto(url)
    column = page.locator("#chart-groups a[data-step='1'] rect.run-column")
    column.tap()
    expect(page.locator("#chart-tip")).to_contain_text("step 1")
    assert page.url == url  # the first tap only shows the numbers
    column.tap()
    page.wait_for_url(re.compile(r"/batches/\d+/\?label=mixed$"))
    context.close()


def test_compare_dashes_each_line_and_the_table_cues_its_hidden_columns(page, live_server, runs):
    gagar, grpo = runs
    login(page, live_server, "rita", PASSWORD)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/runs/compare/?run={gagar.pk}&run={grpo.pk}")
    groups = page.locator("#chart-groups")
    expect(groups).to_contain_text("Colour: the run. Dash: the line.")
    dashes = groups.locator("polyline.run-line").evaluate_all(
        "els => els.map(e => [getComputedStyle(e).stroke, getComputedStyle(e).strokeDasharray])")
    assert len({stroke for stroke, _ in dashes}) == 2 and len({dash for _, dash in dashes}) == 3, dashes
    page.locator("#chart-groups rect.run-column").nth(2).hover()
    expect(page.locator("#chart-tip")).to_contain_text("grpo-run · all pass")
    screenshot(page, "readable-02-compare", full_page=True)

    page.goto(f"{live_server.url}/runs/{gagar.pk}/table/")
    note = page.locator(".scroll-cue-note")
    expect(note).to_be_visible()
    expect(page.locator("th[scope=colgroup]", has_text="Changed lines")).to_be_visible()
    screenshot(page, "readable-03-table")
    page.locator(".scroll-cue-body").evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    expect(note).to_be_hidden()
    step = page.locator(".run-table tbody th.run-table-step").first.bounding_box()
    assert step["x"] >= 0  # the step stays in view while the table scrolls
    assert not page.watch.errors


def test_the_dashboards_text_reads_at_12px_and_its_bars_show_numbers_on_hover(page, live_server, tmp_path):
    from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save
    from tests.webapp.audit.test_dashboard import REVERSED, graded
    from webapp.audit.services import figures_refresh
    from webapp.models import Group
    from webapp.roles import ANNOTATOR

    batch = review_batch(tmp_path, n=4, name="weekly")
    make_user("otto", AUDITOR)
    annotator = make_user("anna", ANNOTATOR)
    for group in Group.objects.filter(batch=batch):
        save(group, annotator, GRADER_TIERS)
        graded(group, GRADER_TIERS, "heuristic-1-678aaa9a-correct-first")
        graded(group, REVERSED, "heuristic-1-678aaa9a-correct-last", grader="qwen")
    login(page, live_server, "otto", PASSWORD)
    page.goto(f"{live_server.url}/audit/dashboard/?batch={batch.pk}")  # asks the worker for the figures
    figures_refresh()  # the worker's task
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/audit/dashboard/?batch={batch.pk}")
        charts = page.locator("svg.chart")
        assert charts.count() > 5
        for i in range(charts.count()):
            sizes = charts.nth(i).evaluate(TEXT_SIZES)
            small = [(text, round(size, 1)) for text, size in sizes if size < 12]
            assert not small, (width, i, small)
    labels = page.locator("#section-agreement svg.chart").first.locator("text.chart-label")
    assert len(set(labels.evaluate_all("els => els.map(e => e.firstChild.textContent)"))) == 2  # not cut alike
    bar = page.locator("#section-agreement rect.chart-bar").first
    bar.hover()
    expect(page.locator("#chart-tip")).to_contain_text("heuristic-1-678aaa9a-correct-")
    screenshot(page, "readable-04-dashboard")
    assert not page.watch.errors


def test_ids_wrap_at_their_hyphens_not_mid_word(rita_page, live_server, swebench):  # noqa: F811 - fixtures
    from webapp.models import Group

    page = rita_page
    big = Group.objects.get(batch=swebench, group_id=BIG)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/batches/{swebench.pk}/")
        cells = page.locator("table.groups-table td.mono, table.groups-table .top-ids > span")
        for i in range(cells.count()):
            breaks = cells.nth(i).evaluate(BREAKS)
            assert all(pair[0] in SEPARATORS for pair in breaks), (width, cells.nth(i).inner_text(), breaks)
        page.goto(f"{live_server.url}/groups/{big.pk}/")
        cells = page.locator(".rk-adv td.mono")
        assert cells.count() > 0
        for i in range(cells.count()):
            breaks = cells.nth(i).evaluate(BREAKS)
            assert all(pair[0] in SEPARATORS for pair in breaks), (width, cells.nth(i).inner_text(), breaks)
    assert not page.watch.errors
