"""Payloads planted in every field do nothing in a real browser: no script runs,
no dialog opens, no request leaves for a URL the page did not mean, and no
element is built from the payload's markup."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.webapp.reviewdata import PAYLOAD, hostile_records, import_batch
from webapp.models import Group, Trajectory
from webapp.roles import AUDITOR

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Elements a payload would create; the review pages have none (the grading panel draws charts).
PLANTED = ", ".join(f"main {selector}:not(#grading-panel *)" for selector in (
    "img", "svg", "iframe", "script", "style", "textarea", "meta", "base",
    "b[hx-on\\:click]", "div[hx-get='/evil']", "a[href^='javascript']",
))


def assert_clean(page):
    page.wait_for_timeout(300)  # let any onerror / hx-trigger=load fire
    assert page.evaluate("window.__pwned") is None
    assert page.locator(PLANTED).count() == 0, page.locator(PLANTED).evaluate_all("els => els.map(e => e.outerHTML)")
    assert page.watch.dialogs == []
    assert page.watch.foreign_requests() == []
    assert not [u for u in page.watch.requests if "/evil" in u or u.endswith(("/x", "/y"))]
    assert [e for e in page.watch.errors if "CSP" in e or "Content Security Policy" in e] == []


def test_nothing_planted_runs(page, live_server, tmp_path):
    batch = import_batch(tmp_path, hostile_records(), name="evil <img src=x onerror=window.__pwned=1>")
    group = Group.objects.get(batch=batch)
    first, second, failing = Trajectory.objects.filter(group=group).order_by("id")
    make_user("otto", AUDITOR)
    login(page, live_server, "otto", PASSWORD)
    assert_clean(page)

    page.goto(f"{live_server.url}/batches/{batch.pk}/")
    ready(page)
    page.fill("#id_q", "evil")
    expect(page.locator(".groups-table tbody tr")).to_have_count(1)
    assert_clean(page)

    page.click(".groups-table tbody a")
    expect(page.locator(".matrix")).to_be_visible()
    ready(page)
    page.locator("details.reference > summary").click()
    for summary in page.locator("details.mini > summary").all():
        summary.click()
    assert_clean(page)
    # the group id and statement are text on the page, not markup
    expect(page.locator(".group-head h1")).to_contain_text('<img src=x onerror="window.__pwned=1">')
    expect(page.locator(".markdown")).to_contain_text('<script>window.__pwned="script"</script>')
    expect(page.locator(".file-row .path", has_text="src/x").first).to_contain_text("U+202E")

    page.locator("td.col >> text=Transcript").first.click()
    expect(page.locator("#transcript details.turn")).to_have_count(4)
    page.click("text=Expand all")
    page.locator("#transcript .more a").first.click()  # show all of the huge tool output
    expect(page.locator("#transcript .part-body pre.text").last).to_contain_text(PAYLOAD[:40])
    page.fill("#transcript input[name=q]", "<script>")
    expect(page.locator("#transcript .results-meta")).to_contain_text("turns match")
    assert_clean(page)

    page.locator(".group-head h1").click()
    page.select_option("#interdiff-form select[name=a]", str(first.pk))
    page.select_option("#interdiff-form select[name=b]", str(second.pk))
    page.keyboard.press("i")
    expect(page.locator("#interdiff .interdiff-head")).to_be_visible()
    assert_clean(page)
    screenshot(page, "07-payloads-group", full_page=False)

    for url in (f"/trajectories/{failing.pk}/transcript/", f"/trajectories/{first.pk}/transcript/3/0/",
                f"/groups/{group.pk}/interdiff/?a={first.pk}&b={failing.pk}", "/"):
        page.goto(live_server.url + url)
        assert_clean(page)
