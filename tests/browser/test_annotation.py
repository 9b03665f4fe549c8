"""Annotators in a real browser: rank by drag and by keyboard, tie, flag, save and see
the advantages move; a stale save from a second browser gets the conflict page; blind
review hides the grader until a save; the queue hands two annotators different groups."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot, settled
from tests.django_fixtures import PASSWORD, make_user
from tests.webapp.annotationdata import grade, review_batch, set_policy
from webapp.models import Annotation, Group
from webapp.roles import ANNOTATOR, RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def batch(tmp_path):
    batch = review_batch(tmp_path, n=3, name="run-7/step-120")
    grade(Group.objects.get(batch=batch, group_id="task-1"),
          rationales={"t1": "The smallest fix: one line in pkg/mod.py.", "t4": "Leaves a debug print behind."})
    return batch


def ranked(page):
    """The ranked ids, best first, with '=' before an id tied with the one above."""
    return page.locator("#rk-list > li").evaluate_all(
        "rows => rows.map(r => (r.classList.contains('tied') ? '=' : '') + r.dataset.tid)")


def advantage(page, tid):
    return page.locator(f'#rk-preview tr[data-tid="{tid}"] .rk-adv-value').inner_text()


def row(page, tid):
    return page.locator(f'.rk-item[data-tid="{tid}"]')


def drag(page, tid, above_tid):
    row(page, above_tid).scroll_into_view_if_needed()  # the ranking card is under the matrix: bring it into view
    grip = row(page, tid).locator(".rk-grip").bounding_box()
    target = row(page, above_tid).bounding_box()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
    page.mouse.down()
    page.mouse.move(target["x"] + 40, target["y"] + 6, steps=12)
    page.mouse.move(target["x"] + 40, target["y"] + 3, steps=4)
    page.mouse.up()


def open_group(page, live_server, group_id):
    page.goto(f"{live_server.url}/groups/{Group.objects.get(group_id=group_id).pk}/")
    ready(page)
    page.wait_for_function("document.getElementById('rk-tiers').value !== ''")


def test_an_annotator_reorders_ties_flags_and_saves(page, live_server, batch):
    make_user("anna", ANNOTATOR)
    login(page, live_server, "anna", PASSWORD)
    open_group(page, live_server, "task-1")
    assert ranked(page) == ["t1", "t2", "=t3", "t4", "t5"]  # the grader's ranking
    expect(page.locator("td.col").filter(has_text="The smallest fix")).to_have_count(1)
    before = advantage(page, "t5")
    matrix_before = page.locator("tr.m-facet", has_text="Advantage").inner_text()

    drag(page, "t5", "t1")
    assert ranked(page) == ["t5", "t1", "t2", "=t3", "t4"]
    expect(page.locator('#rk-preview tr[data-tid="t5"] td').nth(1)).to_have_text("1")
    assert advantage(page, "t5") != before

    row(page, "t4").focus()
    page.keyboard.press("Alt+ArrowUp")  # above the t2 = t3 tier
    assert ranked(page) == ["t5", "t1", "t4", "t2", "=t3"]
    expect(row(page, "t4")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(row(page, "t3")).to_be_focused()
    page.keyboard.press("u")  # untie t3
    row(page, "t1").focus()
    page.keyboard.press("t")  # tie t1 with t5
    assert ranked(page) == ["t5", "=t1", "t4", "t2", "t3"]
    row(page, "t3").focus()
    page.keyboard.press("3")  # flag: out_of_scope_changes
    expect(row(page, "t3").locator(".rk-flag-badges")).to_have_text("out_of_scope_changes")
    page.keyboard.press("Enter")  # flags and rationale
    expect(row(page, "t3").locator("textarea")).to_be_focused()
    page.keyboard.type("Touches a file the task did not need.")
    page.fill("textarea[name=group_rationale]", "t5 and t1 are the same minimal fix.")
    expect(page.locator("#rk-status")).to_have_text("Unsaved changes.")
    expect(page.locator('#rk-preview tr[data-tid="t1"] td').nth(1)).to_have_text("1")
    page.locator("#ranking").scroll_into_view_if_needed()
    screenshot(page, "annotation-01-editor")

    page.click("#rk-save")
    expect(page.locator(".message.success")).to_have_text("Saved version 1.")
    ready(page)
    annotation = Annotation.objects.get()
    assert annotation.tiers == [["t5", "t1"], ["t4"], ["t2"], ["t3"]]
    assert annotation.flags == {"t3": ["out_of_scope_changes"], "t4": ["debug_leftovers"]}
    assert annotation.rationales == {"t3": "Touches a file the task did not need."}
    expect(page.locator(".ranking-final")).to_contain_text("human version 1 by anna")
    matrix_after = page.locator("tr.m-facet", has_text="Advantage").inner_text()
    assert "(human v1)" in matrix_after and matrix_after != matrix_before
    assert ranked(page) == ["t5", "=t1", "t4", "t2", "t3"]
    screenshot(page, "annotation-02-saved", full_page=False)
    page.locator("tr.m-facet", has=page.locator("th", has_text="Grader")).scroll_into_view_if_needed()
    expect(page.locator("td.col .grade-rationale").first).to_have_text("The smallest fix: one line in pkg/mod.py.")
    screenshot(page, "annotation-09-grader-row")

    page.click("text=History · v1")
    expect(page.locator("table.history tbody tr")).to_have_count(2)  # v1 and the grader
    screenshot(page, "annotation-03-history")
    settled(page)
    page.goto(f"{live_server.url}/")
    expect(page.locator(".review-progress")).to_contain_text("1 / 3")
    expect(page.locator(".review-progress")).to_contain_text("anna 1")
    screenshot(page, "annotation-10-batches")
    assert page.watch.errors == [] and page.watch.dialogs == [] and page.watch.foreign_requests() == []


def test_a_stale_save_from_a_second_browser_gets_the_conflict_page(browser, live_server, batch):
    make_user("anna", ANNOTATOR)
    make_user("rita", RESEARCHER)
    pages = []
    for username in ("anna", "rita"):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        login(page, live_server, username, PASSWORD)
        open_group(page, live_server, "task-1")
        pages.append(page)
    anna, rita = pages
    try:
        row(anna, "t5").focus()
        anna.keyboard.press("Alt+ArrowUp")
        anna.click("#rk-save")
        expect(anna.locator(".message.success")).to_have_text("Saved version 1.")

        drag(rita, "t4", "t1")
        assert ranked(rita) == ["t4", "t1", "t2", "=t3", "t5"]
        rita.click("#rk-save")
        expect(rita.locator("h1")).to_have_text("Not saved: the ranking changed while you edited it")
        expect(rita.locator("#conflict-message")).to_contain_text("anna saved version 1")
        expect(rita.locator("#conflict-theirs")).to_contain_text("version 1")
        expect(rita.locator("#conflict-mine li").first).to_contain_text("t4")
        screenshot(rita, "annotation-04-conflict")
        assert Annotation.objects.count() == 1

        rita.click("#save-mine")
        expect(rita.locator(".message.success")).to_have_text("Saved version 2.")
        rita.goto(f"{live_server.url}/batches/{batch.pk}/")
        rita.click("#annotation > summary")
        rita.check("#policy-blind")
        rita.fill("#policy-overlap", "2")
        rita.click("text=Save annotation policy")
        expect(rita.locator("#annotation-body .notice")).to_have_text("Annotation policy saved.")
        expect(rita.locator("#annotation-body")).to_contain_text("blind review on")
        screenshot(rita, "annotation-12-policy")
        assert list(Annotation.objects.order_by("version").values_list("version", "based_on_version",
                                                                      "user__username")) == [
            (1, 0, "anna"), (2, 1, "rita")]
    finally:
        for page in pages:
            page.context.close()


def test_blind_review_hides_the_grader_until_the_annotator_saves(page, live_server, batch):
    set_policy(batch, blind=True)
    make_user("anna", ANNOTATOR)
    login(page, live_server, "anna", PASSWORD)
    page.goto(f"{live_server.url}/groups/{Group.objects.get(group_id='task-1').pk}/")
    ready(page)
    expect(page.locator(".blind-note")).to_be_visible()
    expect(page.locator("#rk-pool > li")).to_have_count(5)
    expect(page.get_by_text("The smallest fix")).to_have_count(0)
    expect(page.locator(".rk-grader")).to_have_count(0)
    expect(page.locator("#rk-save")).to_be_disabled()
    screenshot(page, "annotation-05-blind")

    for tid in ("t2", "t1"):
        row(page, tid).focus()
        page.keyboard.press("Enter")  # rank it
    page.click("button[data-rk=all]")  # rank the rest in their order
    assert ranked(page) == ["t2", "t1", "t3", "t4", "t5"]
    page.click("#rk-save")
    expect(page.locator(".reveal-note")).to_contain_text("Agreement with the grader: τ =")
    expect(page.locator("td.col").filter(has_text="The smallest fix")).to_have_count(1)
    expect(page.locator(".rk-grader").first).to_be_visible()
    screenshot(page, "annotation-06-revealed")


def test_the_queue_hands_two_annotators_different_groups(browser, live_server, batch):
    make_user("anna", ANNOTATOR)
    make_user("bob", ANNOTATOR)
    pages, groups = [], []
    for username in ("anna", "bob"):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        login(page, live_server, username, PASSWORD)
        page.click("text=run-7/step-120")
        if username == "anna":
            page.click("#annotation > summary")
            expect(page.locator("#annotation-body")).to_contain_text("mixed groups ranked by a human")
            screenshot(page, "annotation-11-batch-panel")
        page.click("#open-queue")
        expect(page.locator("h1")).to_contain_text("Annotation queue")
        if username == "anna":
            screenshot(page, "annotation-07-queue")
        page.click("#queue-next")
        expect(page.locator(".badge.lease.mine")).to_be_visible()
        groups.append(page.locator(".group-head h1").inner_text())
        pages.append(page)
    try:
        assert groups == ["task-1", "task-2"]
        anna, bob = pages
        bob.goto(anna.url)
        expect(bob.locator(".badge.lease").first).to_contain_text("held by anna")
        screenshot(anna, "annotation-08-queue-group")
        assert re.search(r"/groups/\d+/", anna.url)
    finally:
        for page in pages:
            page.context.close()


def test_a_researcher_marks_a_pass_as_not_passing_and_the_advantages_follow(page, live_server, batch):
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    open_group(page, live_server, "task-1")
    assert ranked(page) == ["t1", "t2", "=t3", "t4", "t5"]
    assert float(advantage(page, "t1").replace("−", "-")) > 0

    row(page, "t1").locator('[data-op="notes"]').click()
    row(page, "t1").locator(".rk-override-box").check()
    expect(page.locator('#rk-out .rk-item[data-tid="t1"]')).to_have_count(1)
    assert ranked(page) == ["t2", "=t3", "t4", "t5"]
    expect(page.locator("#rk-save")).to_be_enabled()
    expect(page.locator('#rk-preview tr[data-tid="t1"].fail')).to_have_count(1)
    assert float(advantage(page, "t1").replace("−", "-")) < 0

    row(page, "t1").locator(".rk-override-reason").fill("special-cases the test's input instead of fixing f")
    screenshot(page, "override-before-save", full_page=True)
    page.click("#rk-save")
    expect(page.locator("#verdict-overrides")).to_contain_text("marked not passing")
    expect(page.locator("#verdict-overrides")).to_contain_text("special-cases the test's input")
    page.locator("#verdict-overrides").scroll_into_view_if_needed()
    screenshot(page, "override-saved", full_page=True)
    saved = Annotation.objects.get()
    assert saved.verdicts == {"t1": {"passed": False, "reason": "special-cases the test's input instead of fixing f"}}
    assert saved.tiers == [["t2", "t3"], ["t4"], ["t5"]]
    assert not page.watch.errors


def test_an_unranked_row_is_marked_not_passing_by_its_own_button(page, live_server, batch):
    make_user("anna", ANNOTATOR)
    login(page, live_server, "anna", PASSWORD)
    open_group(page, live_server, "task-2")  # not graded: every passing row starts unranked
    assert ranked(page) == []
    row(page, "t3").locator('[data-op="fail"]').click()
    expect(page.locator('#rk-out .rk-item[data-tid="t3"]')).to_have_count(1)
    expect(row(page, "t3").locator(".rk-override-reason")).to_be_focused()
    row(page, "t3").locator(".rk-override-reason").fill("prints the expected output")
    page.click('button[data-rk="all"]')
    assert ranked(page) == ["t1", "t2", "t4", "t5"]
    page.click("#rk-save")
    expect(page.locator("#verdict-overrides")).to_contain_text("prints the expected output")
    assert Annotation.objects.get().verdicts == {"t3": {"passed": False, "reason": "prints the expected output"}}
    assert not page.watch.errors
