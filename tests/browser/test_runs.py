"""The run pages in Chromium: every chart renders with its numbers on hover, a click opens the
step's batch page with the chart's filter, compare draws both runs, run names are escaped, and
no page logs an error or asks for anything off the app."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = '<img src=x onerror=alert(1)>"run'


def test_run_and_compare_pages(page, live_server, tmp_path, monkeypatch):
    from tests.webapp.runs.rundata import make_run
    from webapp.models import Run, RunStep
    from webapp.runs.services import figures_refresh

    monkeypatch.setattr("webapp.derived.send", lambda *a, **k: None)  # the figures are computed here, below
    for name, graded in ((HOSTILE, True), ("grpo-baseline", False)):
        for batch, _ in make_run(tmp_path, name, steps=4, graded=graded, seed=len(name)).values():
            figures_refresh(batch.pk)
    gagar, baseline = Run.objects.get(name=HOSTILE), Run.objects.get(name="grpo-baseline")
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)

    page.goto(f"{live_server.url}/runs/")
    expect(page.locator(".runs-list a.strong").last).to_have_text(HOSTILE)  # newest first
    page.goto(f"{live_server.url}/runs/{gagar.pk}/")
    expect(page.locator("#run-name")).to_have_text(HOSTILE)
    charts = page.locator("svg.run-chart")
    assert charts.count() >= 10
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box["width"] > 300 and box["height"] > 150, i
    pass_rate = page.locator("#chart-pass_rate")
    expect(pass_rate.locator("polyline.run-line")).to_have_count(1)
    expect(pass_rate.locator("rect.run-column title").nth(2)).to_contain_text("step 2\npass rate ")
    screenshot(page, "runs-01-run-page", full_page=True)

    step = RunStep.objects.get(run=gagar, number=2)
    page.locator("#chart-groups a[data-step='2'] rect").click()
    page.wait_for_url(f"{live_server.url}/batches/{step.batch_id}/?label=mixed")
    expect(page.locator("h1")).to_contain_text(f"{HOSTILE}/step-2")

    page.goto(f"{live_server.url}/runs/compare/?run={gagar.pk}&run={baseline.pk}")
    expect(page.locator("#chart-pass_rate polyline.run-line")).to_have_count(2)
    expect(page.locator(".run-differences")).to_contain_text(f"grpo-baseline − {HOSTILE}")
    screenshot(page, "runs-02-compare", full_page=True)
    page.goto(f"{live_server.url}/runs/{gagar.pk}/table/")
    expect(page.locator(".run-table tbody tr")).to_have_count(4)
    assert not page.watch.dialogs and not page.watch.errors and not page.watch.foreign_requests()
