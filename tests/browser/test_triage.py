"""Batch-page triage in a real browser: grade, rank one group against the grader, then
filter by the top pick's flags and by disagreement, and sort by confidence."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def expect_rows(page, group_ids):
    """Waits for the swapped table to list exactly `group_ids`, in order."""
    expect(page.locator("table.groups-table tbody tr td.mono a")).to_have_text(group_ids)


def test_triage_filters_and_sorts_find_the_groups_to_look_at(page, live_server, monkeypatch, tmp_path):
    from tests.webapp.annotationdata import save
    from tests.webapp.batches.triagedata import grade_with, triage_batch
    from webapp.models import Group

    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    batch = triage_batch(tmp_path, extra=(2,))
    grade_with(batch)  # the heuristic grader
    rita = make_user("rita", RESEARCHER)
    save(Group.objects.get(group_id="task-2"), rita, [["t4"], ["t1", "t2", "t3", "t5"]])
    login(page, live_server, "rita", PASSWORD)
    page.goto(f"{live_server.url}/batches/{batch.pk}/")
    cheat = page.locator("tr", has=page.locator("a", has_text="cheat-1"))
    # c1 changes only a test (no effect): the top pick is c2, which fixes the code and edits the test too
    expect(cheat.locator("td.triage-top .badge.flag")).to_have_text(["edits_tests", "out_of_scope_changes"])
    task2 = page.locator("tr", has=page.locator("a", has_text="task-2"))
    expect(task2.locator(".chip.state-reviewed")).to_be_visible()
    expect(task2.locator(".badge.bad")).to_have_text("disagrees")
    screenshot(page, "triage-01-columns", full_page=True)

    page.select_option("#id_top_flag", "edits_tests")
    expect_rows(page, ["cheat-1"])
    expect(page.locator(".table-meta").first).to_contain_text("1 group match")
    assert "top_flag=edits_tests" in page.url
    screenshot(page, "triage-02-top-pick-edits-tests", full_page=True)

    page.select_option("#id_top_flag", "")
    page.select_option("#id_agreement", "disagrees")
    expect_rows(page, ["task-2"])
    screenshot(page, "triage-03-human-disagrees", full_page=True)

    # a grader that reports set confidences: the lowest come first
    page.select_option("#id_agreement", "")
    expect_rows(page, ["cheat-1", "task-1", "task-2"])
    grade_with(batch, "tests.webapp.batches.triagedata:ConfidentGrader",
               {"confidences": {"task-1": 0.9, "cheat-1": 0.15, "task-2": 0.6}})
    page.click("#sort-confidence")
    expect(page.locator(".table-meta").first).to_contain_text("grader confidence, lowest first")
    expect_rows(page, ["cheat-1", "task-2", "task-1"])
    page.click("#sort-confidence")
    expect(page.locator(".table-meta").first).to_contain_text("highest first")
    expect_rows(page, ["task-1", "task-2", "cheat-1"])
    expect(page.locator("#sort-confidence")).to_contain_text("↓")
    page.click("#triage-help summary")
    expect(page.locator("#triage-help")).to_contain_text("two people who ranked it name different best tiers")
    screenshot(page, "triage-04-sorted-by-confidence", full_page=True)
    assert not page.watch.errors
    assert not page.watch.foreign_requests()
