"""The role matrix: every URL x {anonymous, no role, each role}.

Anonymous users are sent to the login page and logged-in users without a
role get 403 on every URL the project serves (found by walking the URL
resolver, so a new view without a guard fails here). The review pages are
read by every role; each row of READ_PAGES says what each role gets.
"""

import pytest
from django.urls import get_resolver, reverse

from tests.django_fixtures import make_user
from tests.webapp.urlwalk import url_patterns
from webapp.models import Group, Trajectory
from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER

pytestmark = pytest.mark.django_db

ROLES = (RESEARCHER, ANNOTATOR, AUDITOR)


def _every_url():
    """(name, url) for every named project URL, with 1 for each int argument."""
    out = []
    for name, _ in url_patterns():
        pattern = get_resolver().reverse_dict.getlist(name)[0][0][0][1]
        out.append((name, reverse(name, kwargs=dict.fromkeys(pattern, 1))))
    return out


def _fetch(client, url):
    """GET, or POST where the URL only takes POST."""
    response = client.get(url)
    return client.post(url) if response.status_code == 405 else response


def test_every_url_needs_a_login(client):
    urls = _every_url()
    assert len(urls) >= 8
    for name, url in urls:
        response = _fetch(client, url)
        assert response.status_code == 302, (name, url, response.status_code)
        assert response["Location"].startswith(reverse("login")), (name, url)


def test_every_url_refuses_a_user_without_a_role(client, outsider):
    client.force_login(outsider)
    for name, url in _every_url():
        assert _fetch(client, url).status_code == 403, (name, url)


@pytest.fixture
def read_pages(sample_batch):
    group = Group.objects.filter(batch=sample_batch, label="mixed").first()
    first, second = Trajectory.objects.filter(group=group).order_by("id")[:2]
    path = first.patch.split(" b/", 1)[1].split("\n", 1)[0]
    return {
        "index": reverse("index"),
        "batch": reverse("batch", args=[sample_batch.pk]),
        "group": reverse("group", args=[group.pk]),
        "interdiff": reverse("interdiff", args=[group.pk]) + f"?a={first.pk}&b={second.pk}",
        "patch_raw": reverse("patch_raw", args=[first.pk]),
        "patch_file": reverse("patch_file", args=[first.pk]) + f"?path={path}",
        "transcript": reverse("transcript", args=[first.pk]),
        "transcript_part": reverse("transcript_part", args=[first.pk, 0, 0]),
        "ranking_history": reverse("ranking_history", args=[group.pk]),
        "annotation_panel": reverse("annotation_panel", args=[sample_batch.pk]),
        "annotation_queue": reverse("annotation_queue", args=[sample_batch.pk]),
    }


# page -> the status each role gets
READ_PAGES = {name: dict.fromkeys(ROLES, 200) for name in (
    "index", "batch", "group", "interdiff", "patch_raw", "patch_file", "transcript", "transcript_part",
    "ranking_history", "annotation_panel")}
READ_PAGES["annotation_queue"] = {RESEARCHER: 200, ANNOTATOR: 200, AUDITOR: 403}

# POST-only URL -> the status each role gets for an empty POST: what the role may not do is 403;
# what it may do answers the empty form (400 for a form that must be filled in, 302 where empty is fine)
WRITE_URLS = {
    "ranking_save": {RESEARCHER: 400, ANNOTATOR: 400, AUDITOR: 403},
    "ranking_preview": {RESEARCHER: 400, ANNOTATOR: 400, AUDITOR: 403},
    "ranking_revert": {RESEARCHER: 400, ANNOTATOR: 403, AUDITOR: 403},
    "lease_release": {RESEARCHER: 302, ANNOTATOR: 302, AUDITOR: 403},
    "queue_next": {RESEARCHER: 302, ANNOTATOR: 302, AUDITOR: 403},
    "annotation_policy": {RESEARCHER: 400, ANNOTATOR: 403, AUDITOR: 403},
}


@pytest.fixture
def write_urls(sample_batch):
    group = Group.objects.filter(batch=sample_batch, label="mixed").first()
    by_group = ("ranking_save", "ranking_preview", "ranking_revert", "lease_release")
    return {name: reverse(name, args=[group.pk if name in by_group else sample_batch.pk]) for name in WRITE_URLS}


@pytest.mark.parametrize("role", ROLES)
def test_each_role_may_change_what_the_matrix_says(client, write_urls, role):
    client.force_login(make_user(f"user-{role}", role))
    for name, url in write_urls.items():
        assert client.get(url).status_code == 405, name
        assert client.post(url).status_code == WRITE_URLS[name][role], (role, name, url)


@pytest.mark.parametrize("role", ROLES)
def test_each_role_gets_what_the_matrix_says(client, read_pages, role):
    client.force_login(make_user(f"user-{role}", role))
    for name, url in read_pages.items():
        assert client.get(url).status_code == READ_PAGES[name][role], (role, name, url)


def test_the_matrix_covers_every_review_page(read_pages):
    names = {name for name, _ in _every_url()}
    assert set(READ_PAGES) <= names
    assert set(read_pages) == set(READ_PAGES)


def test_the_matrices_cover_every_annotation_url(read_pages, write_urls):
    names = {name for name, _ in _every_url()}
    annotation = {name for name in names if name.startswith(("ranking_", "annotation_", "queue_", "lease_"))}
    assert annotation == (set(READ_PAGES) | set(WRITE_URLS)) & annotation
    assert set(write_urls) == set(WRITE_URLS)


def test_a_superuser_reads_every_page(client, read_pages, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="x-long-password"))
    for name, url in read_pages.items():
        assert client.get(url).status_code == 200, name
