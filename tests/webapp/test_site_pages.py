"""What every page shares: the top bar links only to what the user's roles open, the 403,
404 and 500 pages sit inside the site's layout, a 403 is logged once, and the favicon."""

import logging
from xml.etree import ElementTree

import pytest
from django.contrib.staticfiles import finders
from django.test import RequestFactory, override_settings
from django.urls import reverse
from django.views.defaults import server_error

from tests.django_fixtures import make_user
from webapp.roles import ANNOTATOR, AUDITOR, NAV, RESEARCHER

pytestmark = pytest.mark.django_db


def nav(html: str) -> str:
    return html[html.index('<nav class="nav">'):html.index("</nav>")]


@pytest.mark.parametrize("roles, shown", [
    ((RESEARCHER,), ["Batches", "Runs", "API tokens", "Audit"]),
    ((ANNOTATOR,), ["Batches", "Runs", "API tokens"]),
    ((AUDITOR,), ["Batches", "Runs", "API tokens", "Audit"]),
    ((), []),
])
def test_the_top_bar_links_only_to_pages_the_user_opens(client, roles, shown):
    user = make_user("u", *roles)
    client.force_login(user)
    bar = nav(client.get(reverse("api_tokens")).content.decode())
    assert [label for label, _, _ in NAV if f">{label}</a>" in bar] == shown
    for label, name, _ in NAV:  # each link shown opens, each left out would answer 403
        assert client.get(reverse(name)).status_code == (200 if label in shown else 403), (label, roles)


def test_a_403_is_a_page_of_the_site_that_says_why(client):
    client.force_login(make_user("anna", ANNOTATOR))
    response = client.get(reverse("audit_sets"))
    html = response.content.decode()
    assert response.status_code == 403 and "403.html" in [t.name for t in response.templates]
    assert 'class="topbar"' in html and 'href="/static/css/app.css"' in html
    assert ">Batches</a>" in nav(html) and ">Audit</a>" not in nav(html)
    assert "Needs the role auditor or researcher." in html and "signed in as anna (annotator)" in html


def test_a_404_is_a_page_of_the_site_with_the_address_escaped(client, researcher):
    client.force_login(researcher)
    response = client.get("/batches/987654/")
    assert response.status_code == 404 and 'class="topbar"' in response.content.decode()
    assert "No Batch matches the given query." in response.content.decode()
    html = client.get("/no/<b>such</b>/page").content.decode()
    assert "There is no page at <code>/no/%3Cb%3Esuch%3C/b%3E/page</code>." in html and "<b>such" not in html
    assert "Resolver404" not in html


def test_the_500_page_has_the_layout_without_a_request_context():
    response = server_error(RequestFactory().get("/"))
    html = response.content.decode()
    assert response.status_code == 500 and "Something went wrong on the server" in html
    assert 'class="topbar"' in html and "favicon.svg" in html
    assert "hx-headers" not in html and ">Batches</a>" not in html  # no user, no token: no nav


def test_a_403_is_logged_once_with_debug_on_too():
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Forbidden", None, None)

    def handlers_reached() -> list:
        reached, logger = [], logging.getLogger("django.request")
        while logger:
            reached += [h for h in logger.handlers if not type(h).__module__.startswith("_pytest")
                        and record.levelno >= h.level and h.filter(record)]
            logger = logger.parent if logger.propagate else None
        return reached

    for debug in (False, True):
        with override_settings(DEBUG=debug):
            assert len(handlers_reached()) == 1, debug


def test_the_favicon_is_an_svg_every_page_links(client, researcher):
    path = finders.find("favicon.svg")
    assert path and ElementTree.parse(path).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    client.force_login(researcher)
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in client.get("/").content.decode()


def test_a_head_request_answers_as_a_get_does_without_a_body(client, researcher):
    # Health checks and link checkers send HEAD: it answered 405 on every page.
    assert client.head("/").status_code == client.get("/").status_code == 302  # to the login page
    client.force_login(researcher)
    for name in ("index", "runs", "api_tokens"):
        head = client.head(reverse(name))
        assert head.status_code == 200 and head.content == b"", name


@pytest.mark.parametrize("address, back", [("/batches/import/", "/"), ("/audit/items/7/verdict/", "/audit/items/7/")])
def test_opening_a_forms_address_is_a_site_page_that_links_the_form(client, researcher, address, back):
    client.force_login(researcher)
    response = client.get(address)
    html = response.content.decode()
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert 'class="topbar"' in html and "This address takes a form, not a visit" in html
    assert f'<a class="btn" href="{back}">Back to the page with the form</a>' in html


def test_with_debug_on_a_404_is_the_site_page_not_djangos_list_of_urls(client, researcher, settings):
    settings.DEBUG = True
    client.force_login(researcher)
    for address, says in [("/no/<b>such</b>/page", "There is no page at <code>/no/%3Cb%3Esuch%3C/b%3E/page</code>."),
                          ("/batches/987654/", "No Batch matches the given query.")]:
        response = client.get(address)
        html = response.content.decode()
        assert response.status_code == 404 and 'class="topbar"' in html and says in html, address
        assert "URLconf" not in html and "<b>such" not in html
    assert client.get("/audit").status_code == 301  # a missing slash is still added
