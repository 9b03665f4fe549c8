"""Untrusted data never becomes markup: the server-side half of the XSS tests
(the browser half, in tests/browser, checks that nothing runs)."""

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from tests.webapp.reviewdata import PAYLOAD, hostile_records, import_batch
from webapp.middleware import CONTENT_SECURITY_POLICY
from webapp.models import Group, Trajectory

pytestmark = pytest.mark.django_db

OUR_SCRIPTS = {"/static/vendor/htmx.min.js", "/static/js/review.js", "/static/vendor/sortable.min.js",
               "/static/js/ranking.js"}
FORBIDDEN_TAGS = {"iframe", "object", "embed", "svg", "img", "base", "style", "textarea", "frame", "math"}
OUR_TEXTAREAS = re.compile(r"rationale-\d+|group_rationale")  # the ranking editor's own


class Audit(HTMLParser):
    """Collects every tag that could run code or load something, from the parsed page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems = []
        self.text = []

    def handle_data(self, data):
        self.text.append(data)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src") not in OUR_SCRIPTS:
            self.problems.append(("script", attrs))
        if tag in FORBIDDEN_TAGS and not (tag == "textarea" and OUR_TEXTAREAS.fullmatch(attrs.get("name") or "")):
            self.problems.append((tag, attrs))
        if tag == "meta" and "http-equiv" in attrs:
            self.problems.append((tag, attrs))
        if tag == "link" and attrs.get("rel") == "stylesheet" and not attrs.get("href", "").startswith("/static/"):
            self.problems.append((tag, attrs))
        for name, value in attrs.items():
            value = value or ""
            if name.startswith("on"):
                self.problems.append((tag, name))
            if name.startswith(("hx-on", "data-hx-on")):
                self.problems.append((tag, name))
            if name in ("hx-get", "hx-post", "href", "action", "src") and value.lower().lstrip().startswith(
                    ("javascript:", "data:text", "//")):
                self.problems.append((tag, name, value))
            if name == "hx-get" and not value.startswith(("/", "?")):
                self.problems.append((tag, name, value))
            if "/evil" in value:
                self.problems.append((tag, name, value))


def audit(html: str) -> list:
    parser = Audit()
    parser.feed(html)
    return parser.problems


@pytest.fixture
def hostile(tmp_path):
    batch = import_batch(tmp_path, hostile_records(), name="evil<script>x</script>")
    group = Group.objects.get(batch=batch)
    trajectories = list(Trajectory.objects.filter(group=group).order_by("id"))
    return batch, group, trajectories


def _pages(batch, group, trajectories):
    a, b = trajectories[0], trajectories[2]
    path = group.trajectories.order_by("id").first().patch.split(" b/", 1)[1].split("\n", 1)[0]
    yield reverse("index"), {}
    yield reverse("batch", args=[batch.pk]), {"q": PAYLOAD[:150]}
    yield reverse("batch", args=[batch.pk]), {}
    yield reverse("group", args=[group.pk]), {"q": "evil"}
    yield reverse("interdiff", args=[group.pk]), {"a": a.pk, "b": b.pk}
    yield reverse("patch_file", args=[a.pk]), {"path": path}
    yield reverse("transcript", args=[a.pk]), {}
    yield reverse("transcript", args=[a.pk]), {"q": "<script>"}
    yield reverse("transcript_part", args=[a.pk, 3, 0]), {"q": "onerror"}
    yield reverse("transcript_part", args=[a.pk, 2, 1]), {}


def test_payloads_in_every_field_come_out_as_text(client, researcher, hostile):
    client.force_login(researcher)
    for url, params in _pages(*hostile):
        for headers in ({}, {"HX-Request": "true"}):
            response = client.get(url, params, headers=headers)
            assert response.status_code == 200, url
            html = response.content.decode()
            assert audit(html) == [], (url, params, headers)
            assert "&lt;" in html, url  # the payload is there, as text


def test_direction_overrides_are_shown_not_applied(client, researcher, hostile):
    _, group, _ = hostile
    client.force_login(researcher)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    parser = Audit()
    parser.feed(html.split("</title>", 1)[1])
    assert not any("\u202e" in text for text in parser.text)
    assert '<span class="bidi" title="direction control U+202E">U+202E</span>' in html


def test_the_csp_header_is_on_every_response(client, researcher, hostile):
    batch, group, trajectories = hostile
    assert client.get(reverse("login"))["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    client.force_login(researcher)
    for url, params in _pages(batch, group, trajectories):
        assert client.get(url, params)["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert client.get(reverse("patch_raw", args=[trajectories[0].pk]))["Content-Security-Policy"]
    assert client.get("/no/such/page/")["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY and "script-src 'self'" in CONTENT_SECURITY_POLICY


def test_pages_have_no_inline_script_or_style(client, researcher, hostile):
    batch, group, trajectories = hostile
    client.force_login(researcher)
    for url, params in _pages(batch, group, trajectories):
        html = client.get(url, params).content.decode()
        assert " style=" not in html and "<script>" not in html, url


def test_htmx_is_configured_for_a_strict_csp(client, researcher):
    client.force_login(researcher)
    html = client.get(reverse("index")).content.decode()
    for setting in ('"allowEval":false', '"allowScriptTags":false', '"selfRequestsOnly":true',
                    '"includeIndicatorStyles":false'):
        assert setting in html
    assert "hx-headers='{\"X-CSRFToken\": \"" in html
