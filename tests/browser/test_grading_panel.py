"""The grading panel in a real browser: how each run ended, and the flag cap applied."""

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import SAMPLE_ROLLOUTS
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def graded_run(batch, fail_on):
    """A run of the scripted grader, graded in this process, that fails the groups matching `fail_on`."""
    from webapp.grading.services import grading_launch
    from webapp.grading.worker import gradings_process

    run = grading_launch(batch=batch, grader="tests.workers.graders:ScriptedGrader", regrade=True,
                         config={"fail_on": fail_on}).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    return run


def test_failed_partial_and_done_runs_look_different(page, live_server, monkeypatch):
    from webapp.models import Batch

    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    call_command("import_rollouts", str(SAMPLE_ROLLOUTS), batch="sample", verbosity=0)
    batch = Batch.objects.get(name="sample")
    runs = {state: graded_run(batch, fail_on) for state, fail_on in
            (("failed", "invoicekit"), ("partial", "invoicekit-001"), ("done", "nothing-matches"))}
    from webapp.grading.services import panel_refresh

    panel_refresh(batch.pk)  # what the panel's worker does once the gradings commit
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    page.goto(f"{live_server.url}/batches/{batch.pk}/grading/")
    colours = {}
    for state in runs:
        badge = page.locator(f"tr.run-{state} .run-state-{state}")
        expect(badge).to_have_text(state)
        colours[state] = badge.evaluate("e => getComputedStyle(e).backgroundColor")
    assert len(set(colours.values())) == 3, colours
    expect(page.locator("tr.run-failed.run-error-row")).to_contain_text("Every grading failed")
    expect(page.locator("tr.run-partial.run-error-row")).to_contain_text("1 of 6 gradings failed")
    failed_width = page.locator("tr.run-failed .run-bar-failed").get_attribute("width")
    assert float(failed_width) == 100.0
    expect(page.locator(".flag-caps")).to_contain_text("capped at 0.0")
    assert not page.watch.errors
    screenshot(page, "grading-01-run-states", full_page=True)
