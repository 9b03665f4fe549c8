"""The API's documentation page works in a real browser under the app's strict CSP, from the
app's own static files (no CDN), and lists every operation of the schema."""

import pytest
from playwright.sync_api import expect

from webapp.api.endpoints import api

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_docs_page_lists_every_operation_with_no_csp_violation(page, live_server):
    page.goto(f"{live_server.url}/api/docs")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    paths = {op["operationId"] for ops in api.get_openapi_schema()["paths"].values() for op in ops.values()}
    assert operations.count() == len(paths)
    expect(page.get_by_role("button", name="Authorize")).to_be_visible()
    assert page.watch.foreign_requests() == []
    assert page.watch.errors == []
