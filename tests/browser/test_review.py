"""A reviewer's path through the pages in a real browser: log in, open a batch,
filter, open a group, hide failing, open a transcript, an interdiff, and move
between groups with the keyboard."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import group as group_records
from tests.webapp.reviewdata import import_batch, records
from webapp.models import Group
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def batch(tmp_path):
    recs = records("task-1") + records("task-2") + records("task-3") + group_records("all-good", [1, 1])
    return import_batch(tmp_path, recs, name="run-7/step-120")


def test_a_reviewer_compares_a_group(page, live_server, batch):
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    page.click("text=run-7/step-120")
    ready(page)
    expect(page.locator(".groups-table tbody tr")).to_have_count(4)
    screenshot(page, "01-batch")

    page.select_option("#id_label", "mixed")  # htmx swaps the table and pushes the URL
    expect(page.locator(".groups-table tbody tr")).to_have_count(3)
    expect(page).to_have_url(re.compile(rf"^{re.escape(live_server.url)}/batches/{batch.pk}/\?(.*&)?label=mixed(&|$)"))
    page.fill("#id_q", "task-2")
    expect(page.locator(".groups-table tbody tr")).to_have_count(1)
    page.fill("#id_q", "")
    expect(page.locator(".groups-table tbody tr")).to_have_count(3)
    screenshot(page, "02-batch-filtered")

    page.click(".groups-table >> text=task-2")
    expect(page.locator(".group-head h1")).to_have_text("task-2")
    ready(page)
    failing = page.locator("th.col.fail").first
    expect(failing).to_be_visible()
    expect(page.locator("text=Identical to").first).to_be_visible()
    screenshot(page, "03-group")

    page.keyboard.press("f")
    expect(failing).to_be_hidden()
    expect(page).to_have_url(f"{live_server.url}/groups/{Group.objects.get(group_id='task-2').pk}/?label=mixed"
                             "&failing=hide")
    screenshot(page, "04-group-failing-hidden")
    page.click("#toggle-failing")
    expect(failing).to_be_visible()

    page.locator("td.col >> text=Transcript").first.click()
    turns = page.locator("#transcript details.turn")
    expect(turns).to_have_count(5)
    tool_turn = page.locator("#transcript details.turn.role-tool").first
    expect(tool_turn).not_to_have_attribute("open", "")
    tool_turn.locator("summary").click()
    expect(tool_turn.locator("pre.text")).to_contain_text("def f(x):")
    page.fill("#transcript input[name=q]", "returns")
    expect(page.locator("#transcript .results-meta")).to_have_text("1 of 5 turns match “returns”")
    expect(page.locator("#transcript mark")).to_have_text("returns")
    screenshot(page, "05-transcript")

    page.locator(".group-head h1").click()  # leave the search box, so keys are shortcuts again
    page.keyboard.press("i")
    expect(page.locator("#interdiff .interdiff-head")).to_contain_text("A = t1")
    page.select_option("#interdiff-form select[name=b]", label="t4 · pass")
    page.click("#interdiff-form button")
    expect(page.locator("#interdiff")).to_contain_text("print('debug', x)")
    screenshot(page, "06-interdiff")

    page.locator(".group-head h1").click()
    page.keyboard.press("j")
    expect(page.locator(".group-head h1")).to_have_text("task-3")
    assert "label=mixed" in page.url
    ready(page)
    page.keyboard.press("k")
    expect(page.locator(".group-head h1")).to_have_text("task-2")
    ready(page)
    page.keyboard.press("k")
    expect(page.locator(".group-head h1")).to_have_text("task-1")
    expect(page.locator('a[rel="prev"]')).to_have_count(0)

    assert page.watch.dialogs == [] and page.watch.errors == []
    assert page.watch.foreign_requests() == []


def test_statements_read_as_written_and_the_interdiff_shows_the_changes(page, live_server, tmp_path):
    from tests.webapp.review.test_diff_numbers import GUTTER_PATCH, module_patch
    from tests.webapp.review.test_statement import GITHUB, TRAC

    recs = records("trac-ticket", statement=TRAC)
    recs[0]["patch"] = module_patch({20: "value_20 = 20  # fixed by A"})
    recs[1]["patch"] = module_patch({310: "value_310 = -310  # fixed by B"})
    recs[2]["patch"] = GUTTER_PATCH
    import_batch(tmp_path, recs + records("github-issue", statement=GITHUB), name="statements")
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)

    page.goto(f"{live_server.url}/groups/{Group.objects.get(group_id='trac-ticket').pk}/")
    ready(page)
    as_written, as_markdown = page.locator("pre.statement-text"), page.locator(".statement-views .markdown")
    expect(as_written).to_be_visible()
    expect(as_markdown).to_be_hidden()
    assert as_written.inner_text() == TRAC  # identifiers, tabs, "# Out:" lines and line breaks as written
    screenshot(page, "08-statement-as-written")
    page.click("label[for=statement-as-markdown]")  # the toggle is CSS: no script involved
    expect(as_markdown).to_be_visible()
    expect(as_written).to_be_hidden()
    expect(as_markdown.locator("h1").first).to_have_text("Out: b'\\x00\\x01'")
    page.click("label[for=statement-as-written]")
    expect(as_written).to_be_visible()

    third = page.locator("td.col", has_text="def total():")
    gutters = third.locator(".ln.del, .ln.add").evaluate_all(
        "rows => rows.map(r => [getComputedStyle(r, '::before').content, getComputedStyle(r, '::after').content])")
    assert gutters == [['"176"', '""'], ['""', '"180"'], ['""', '"181"']]

    page.locator(".group-head h1").click()
    page.keyboard.press("i")
    interdiff = page.locator("#interdiff")
    expect(interdiff.locator(".interdiff-head")).to_contain_text("A = t1")
    expect(interdiff.locator(".hh")).to_have_text(["@@ -17,7 +17,7 @@", "@@ -307,7 +307,7 @@"])
    changed = interdiff.locator(".ln.del, .ln.add")
    expect(changed).to_have_text(["value_20 = 20  # fixed by A", "value_20 = 20",
                                  "value_310 = 310", "value_310 = -310  # fixed by B"])
    expect(interdiff.locator(".ln.del .c1").first).to_have_text("# fixed by A")  # highlighted
    interdiff.scroll_into_view_if_needed()
    screenshot(page, "09-interdiff-changes")

    page.goto(f"{live_server.url}/groups/{Group.objects.get(group_id='github-issue').pk}/")
    expect(page.locator(".statement-views .markdown h3")).to_have_text("Bug")
    expect(page.locator("pre.statement-text")).to_be_hidden()
    screenshot(page, "10-statement-markdown")

    assert page.watch.dialogs == [] and page.watch.errors == []
