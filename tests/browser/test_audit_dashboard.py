"""The grader dashboard in a real browser: "computing" until the worker's first recompute, when
the page shows the figures by itself (no reload by hand), then the correctness section first,
charts above their tables and the drift warning for a version that ranks the gold set worse."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from webapp.roles import ANNOTATOR, AUDITOR

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_auditor_reads_the_dashboard_and_sees_the_drift_warning(page, live_server, tmp_path):
    from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save
    from tests.webapp.audit.test_dashboard import REVERSED, graded
    from webapp.audit.services import figures_refresh, gold_mark
    from webapp.models import Group

    batch = review_batch(tmp_path, n=8, name="weekly")
    auditor, annotator = make_user("otto", AUDITOR), make_user("anna", ANNOTATOR)
    for i, group in enumerate(Group.objects.filter(batch=batch).order_by("pk")):
        if i < 7:
            save(group, annotator, GRADER_TIERS)
        else:  # reversed, t5 marked a lucky pass: the correctness section's figures
            save(group, annotator, REVERSED[1:], verdicts={"t5": {"passed": False, "reason": "a lucky pass"}})
        if i < 6:
            gold_mark(group=group, user=auditor)
        graded(group, GRADER_TIERS, "heuristic-1", tokens=0, seconds=0.01 * (i + 1))
        graded(group, REVERSED if i % 4 else GRADER_TIERS, "agentic-qwen-2", grader="qwen", tokens=900 + 40 * i,
               seconds=20.0 + i)
    login(page, live_server, "otto", PASSWORD)
    page.click("nav.nav >> text=Audit")
    page.click("#dashboard-link")
    page.select_option("#dashboard-batch", str(batch.pk))
    page.click("form.dashboard-pick button[type=submit]")
    expect(page.locator("h1")).to_have_text("Grader dashboard · weekly")
    expect(page.locator("#figures-updating")).to_contain_text("Computing… heuristic-1, agentic-qwen-2")
    expect(page.locator("#table-agreement tbody td.empty")).to_have_count(1)  # nothing yet
    screenshot(page, "audit-dashboard-00-computing")
    page.evaluate("window.notReloaded = true")  # gone once the page reloads
    figures_refresh()  # what the worker does with the request the page queued; the page polls for it
    expect(page.locator("#figures-updating")).to_have_count(0)
    assert page.evaluate("window.notReloaded === undefined")
    expect(page.locator("#table-agreement tbody tr")).to_have_count(8)  # two versions, four measures
    correctness = page.locator("#section-correctness")  # the first section; console errors: checked at the end
    expect(correctness.locator("tbody tr")).to_have_count(12)  # two versions, three rankings, two measures
    expect(correctness.locator("svg.chart")).to_have_count(2)
    expect(page.locator(".dashboard-section").first).to_have_id("section-correctness")
    warning = page.locator("#drift-warning")
    expect(warning).to_contain_text("agentic-qwen-2")
    expect(warning).to_contain_text("below heuristic-1")
    charts = page.locator("#section-agreement svg.chart")
    expect(charts).to_have_count(4)
    assert "Kendall tau-b with human rankings" in charts.first.locator("title").first.text_content()
    screenshot(page, "audit-dashboard-01-agreement-and-drift-warning")
    page.locator("#section-drift").scroll_into_view_if_needed()
    expect(page.locator("#section-drift svg.chart")).to_have_count(3)
    screenshot(page, "audit-dashboard-02-drift", full_page=False)
    page.locator("#section-bias").scroll_into_view_if_needed()
    screenshot(page, "audit-dashboard-03-bias")
    page.locator("#section-shifts").scroll_into_view_if_needed()
    screenshot(page, "audit-dashboard-04-shifts")
    with page.expect_download() as download:
        page.click("#section-cost a.csv-link")
    assert download.value.suggested_filename == "audit-cost.csv"
    assert page.watch.errors == [] and page.watch.foreign_requests() == []
