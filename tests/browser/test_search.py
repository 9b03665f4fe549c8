"""Searching a batch in a real browser: a word only in a transcript and a word only in a
patch; each hit opens the group page at that turn or hunk. A batch no worker has indexed
yet says so."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.webapp.reviewdata import MESSAGES, file_patch, import_batch, records
from webapp.models import Trajectory
from webapp.roles import RESEARCHER
from webapp.search.services import batch_index

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FAR_TURN = 130  # past the transcript panel's first page of turns


@pytest.fixture
def batch(tmp_path):
    recs = records("task-1") + records("task-2")
    steps = [{"role": "assistant", "content": f"Step {i}: run the tests again."} for i in range(FAR_TURN)]
    steps[FAR_TURN - len(MESSAGES) - 1] = {"role": "tool", "content": "fixture zebrafish_loader missing"}
    recs[8]["messages"] = [*MESSAGES, *steps][:FAR_TURN + 1]  # task-2's t3
    body = [f"    value_{i} = {i}" for i in range(40)]
    recs[9]["patch"] = (file_patch("pkg/far.py", body, start=1)  # task-2's t4: the word in its second hunk
                        + "@@ -200,1 +240,2 @@ def later():\n     pass\n+    quetzal_handler()\n")
    batch = import_batch(tmp_path, recs, name="run-8")
    batch_index(batch.pk)  # what the worker does once the import commits
    return batch


def test_a_hit_opens_the_turn_or_the_hunk_it_was_found_in(page, live_server, batch, tmp_path):
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    t3 = Trajectory.objects.get(group__group_id="task-2", trajectory_id="t3")
    t4 = Trajectory.objects.get(group__group_id="task-2", trajectory_id="t4")
    page.goto(f"{live_server.url}/batches/{batch.pk}/search/")
    ready(page)
    page.fill("#id_q", "zebrafish")
    page.click("form[role=search] button")
    expect(page.locator(".hit")).to_have_count(1)
    expect(page.locator(".hit .where")).to_have_text(f"transcript turn #{FAR_TURN} · tool")
    expect(page.locator(".hit mark")).to_have_text("zebrafish")
    expect(page).to_have_url(f"{live_server.url}/batches/{batch.pk}/search/?q=zebrafish&kind=")
    screenshot(page, "search-01-turn-hit")

    page.click(".hit-open")
    turn = page.locator(f"#turn-{t3.pk}-{FAR_TURN - 1}")
    expect(turn).to_be_visible()
    expect(turn).to_have_attribute("open", "")
    expect(turn).to_have_class("turn role-tool hit-target")
    expect(turn).to_be_in_viewport()
    expect(page.locator("#transcript .transcript-head")).to_contain_text("t3")
    screenshot(page, "search-02-group-at-turn")

    page.go_back()
    ready(page)
    page.fill("#id_q", "quetzal_handler")
    page.select_option("#id_kind", "patch")
    expect(page.locator(".hit .where")).to_contain_text("pkg/far.py · @@ -200,1 +240,2 @@ def later():")
    expect(page.locator(".hit")).to_have_count(1)
    screenshot(page, "search-03-patch-hit")
    page.click(".hit-open")
    hunk = page.locator(f"th#t-{t4.pk}")  # the column, then its hunk
    expect(hunk).to_be_attached()
    opened = page.locator("details.hunk.hit-target")
    expect(opened).to_have_count(1)
    expect(opened).to_contain_text("quetzal_handler()")
    expect(opened).to_be_in_viewport()
    assert opened.get_attribute("id").startswith(f"hunk-{t4.pk}-")
    screenshot(page, "search-04-group-at-hunk")

    appended = import_batch(tmp_path, records("task-3"), name="run-9")  # no worker has indexed it yet
    page.goto(f"{live_server.url}/batches/{appended.pk}/search/?q=adds+one")
    ready(page)
    expect(page.locator(".indexing")).to_have_text("Indexing: 0 of 6 trajectories; results may be missing.")
    expect(page.locator(".hits .empty")).to_have_text("Nothing indexed so far holds this text.")
    screenshot(page, "search-05-indexing")
    assert page.watch.errors == [] and page.watch.foreign_requests() == []
