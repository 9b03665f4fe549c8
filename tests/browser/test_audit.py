"""Auditing in a real browser: make a set of 5 from a batch graded by the heuristic grader, work
through it with the keyboard, and see the set's progress."""

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import SAMPLE_ROLLOUTS
from webapp.roles import AUDITOR

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def heuristic_graded(monkeypatch):
    """The sample's six mixed groups, graded by the heuristic grader in this process."""
    from webapp.grading.services import grading_launch
    from webapp.grading.worker import gradings_process
    from webapp.models import Batch

    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    call_command("import_rollouts", str(SAMPLE_ROLLOUTS), batch="sample", verbosity=0)
    batch = Batch.objects.get(name="sample")
    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    assert run.gradings.filter(status="done").count() == 6
    return batch


def test_an_auditor_makes_a_set_and_works_through_it_with_the_keyboard(page, live_server, monkeypatch):
    from webapp.models import AuditSet, AuditVerdict

    batch = heuristic_graded(monkeypatch)
    make_user("otto", AUDITOR)
    login(page, live_server, "otto", PASSWORD)
    page.click("nav.nav >> text=Audit")
    page.fill("#id_name", "first look")
    page.select_option("#id_source", f"batch:{batch.pk}")
    page.select_option("#id_stratify_by", "confidence")
    page.fill("#id_bins", "2")
    page.fill("#id_seed", "11")
    page.fill("#id_size", "5")
    page.click("#audit-preview")
    expect(page.locator("#audit-plan h3")).to_contain_text("5 of 6 graded groups")
    screenshot(page, "audit-01-create-form", full_page=True)
    page.click("#audit-create-button")
    expect(page.locator("h1")).to_have_text("first look")
    audit_set = AuditSet.objects.get()
    assert audit_set.size == 5 and sum(q["quota"] for q in audit_set.design["quotas"]) == 5

    page.click("#audit-continue")
    verdicts = ["1", "2", "3", "1", "3"]
    for n, key in enumerate(verdicts, start=1):
        expect(page.locator("#audit-title")).to_contain_text(f"item {n} of 5")
        expect(page.locator("#audited-ranking tbody tr").first).to_be_visible()
        page.wait_for_load_state("load")  # the keys' script is deferred: the title shows before it runs
        page.keyboard.press(key)
        if n == 2:
            page.check("input[name=categories][value=preferred_verbose]")
            page.fill("textarea[name=notes]", "the top one keeps a debug print")
            page.locator("#audit-title").click()  # leave the notes: keys type into a text field
            screenshot(page, "audit-02-auditor-page")
        page.keyboard.press("s")
    expect(page.locator("#audit-all-done")).to_be_visible()
    saved = AuditVerdict.objects.order_by("item__position")
    assert [v.verdict for v in saved] == ["correct", "partly", "wrong", "correct", "wrong"]
    assert saved[1].categories == ["preferred_verbose"] and saved[1].notes == "the top one keeps a debug print"
    expect(page.locator("#audit-progress")).to_contain_text("You: 5 of 5")
    expect(page.locator("#audit-items tbody tr.done")).to_have_count(5)

    page.goto(f"{live_server.url}/audit/items/{saved[0].item_id}/")
    expect(page.locator("#audit-prev")).to_have_count(0)
    page.keyboard.press("n")  # every item is judged: back to the set
    expect(page.locator("h1")).to_have_text("first look")
    screenshot(page, "audit-03-set-progress", full_page=True)
    assert not page.watch.errors and not page.watch.dialogs
