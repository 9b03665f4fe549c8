"""The site's frame in a real browser, at 1440×900 and 1280×800: an annotator's top bar links
only to pages an annotator opens, a 403 and a 404 are styled pages of the site with its
navigation, and the favicon loads."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from webapp.roles import ANNOTATOR

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width, height", [(1440, 900), (1280, 800)])
def test_an_annotator_meets_no_dead_link_and_errors_inside_the_layout(page, live_server, width, height):
    make_user("anna", ANNOTATOR)
    page.set_viewport_size({"width": width, "height": height})
    login(page, live_server, "anna", PASSWORD)
    expect(page.locator(".topbar .nav a")).to_have_text(["GAGAR Studio", "Batches", "Runs", "API tokens"])
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    fetched = page.request.get(f"{live_server.url}{icon}")
    assert fetched.status == 200 and fetched.headers["content-type"].startswith("image/svg")

    for path, status, heading in (("/audit/", 403, "This page is not open to you"),
                                  ("/batches/987654/", 404, "Nothing here")):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == status
        expect(page.locator("#error-page h1")).to_have_text(heading)
        expect(page.locator(".topbar .nav a")).to_have_text(["GAGAR Studio", "Batches", "Runs", "API tokens"])
        # the site's stylesheet applies: the dark top bar, the card
        assert page.locator(".topbar").evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(29, 35, 48)"
        card = page.locator("#error-page").evaluate("e => e.getBoundingClientRect().right")
        assert card <= width
        screenshot(page, f"site-{status}-{width}")
    expect(page.locator("#error-page")).to_contain_text("No Batch matches the given query.")
    page.locator("#error-page a", has_text="Back to the batches").click()
    page.wait_for_url(f"{live_server.url}/")
    assert not page.watch.errors or all("403" in e or "404" in e for e in page.watch.errors)
