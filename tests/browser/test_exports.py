"""The exports panel on the batch page in a real browser: launching keeps the page still."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready
from tests.django_fixtures import PASSWORD, make_user
from tests.webapp.annotationdata import review_batch
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()


def test_launching_an_export_keeps_the_page_where_it_was(page, live_server, tmp_path):
    batch = review_batch(tmp_path, n=30, name="run-7/step-120")
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)
    page.set_viewport_size({"width": 1400, "height": 500})
    page.goto(f"{live_server.url}/batches/{batch.pk}/")
    ready(page)
    page.click("#exports > summary")
    for form, answer in (("#export-sft", "has no group whose ranking a human made or confirmed"),
                         ("#export-advantages", "is queued")):
        button = page.locator(f"{form} button[type=submit]")
        button.scroll_into_view_if_needed()
        scrolled = page.evaluate("window.scrollY")
        button.click()
        expect(page.locator("#exports-body")).to_contain_text(answer)
        assert page.evaluate("window.scrollY") == scrolled, form
    assert not page.watch.errors
