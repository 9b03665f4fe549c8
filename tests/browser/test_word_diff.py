"""Word-level marks in a real browser: the one word that changed in a line is marked,
in its line's colours, and the mark at the end of a long line can be scrolled to."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import group as group_records
from tests.webapp.reviewdata import file_patch, import_batch
from webapp.models import Group
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "    message = '" + "all work and no play " * 12 + "{}'"


def test_the_changed_word_is_marked_in_both_lines(page, live_server, tmp_path):
    records = group_records("words", [1, 0])
    records[0]["patch"] = file_patch("pkg/limits.py", ["    limit = compute(value, 20)", LONG.format("done")],
                                     ["    limit = compute(value, 10)", LONG.format("todo")], start=3)
    records[1]["patch"] = file_patch("pkg/other.py", ["x = 1"], new=True)  # nothing to pair
    import_batch(tmp_path, records, name="words")
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    page.goto(f"{live_server.url}/groups/{Group.objects.get(group_id='words').pk}/")
    ready(page)

    removed, added = page.locator("pre.code .ln.del mark"), page.locator("pre.code .ln.add mark")
    expect(removed).to_have_text(["10", "todo"])
    expect(added).to_have_text(["20", "done"])
    colours = [mark.evaluate("m => getComputedStyle(m).backgroundColor") for mark in (removed.first, added.first)]
    assert colours[0] != colours[1] and "rgba(0, 0, 0, 0)" not in colours  # red-ish and green-ish, not clear
    added.first.scroll_into_view_if_needed()
    screenshot(page, "word-diff-01-marked")

    added.last.scroll_into_view_if_needed()  # at the end of a line wider than its column
    expect(added.last).to_be_in_viewport()
    screenshot(page, "word-diff-02-long-line-end")
    assert not page.watch.errors
