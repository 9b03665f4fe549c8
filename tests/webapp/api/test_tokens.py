"""The API tokens page: make a token (shown once), list them, revoke one; only a hash is kept."""

import hashlib
import re

import pytest
from django.urls import reverse

from webapp.models import ApiToken

pytestmark = pytest.mark.django_db


def created_token(response) -> str:
    return re.search(r'<code class="token-value">([^<]+)</code>', response.content.decode())[1]


def test_it_makes_a_token_shows_it_once_and_keeps_only_its_hash(client, annotator):
    client.force_login(annotator)
    response = client.post(reverse("api_token_create"), {"name": "run-7 <trainer>"})
    assert response.status_code == 200
    value = created_token(response)
    assert value.startswith("gagar_") and len(value) > 40
    token = ApiToken.objects.get(user=annotator)
    assert token.digest == hashlib.sha256(value.encode()).hexdigest()
    assert value not in {token.name, token.prefix, token.digest} and value.startswith(token.prefix)
    assert "run-7 &lt;trainer&gt;" in response.content.decode()  # the name is escaped

    listing = client.get(reverse("api_tokens")).content.decode()
    assert value not in listing
    assert f"{token.prefix}…" in listing and "never" in listing


def test_each_token_is_new(client, researcher):
    client.force_login(researcher)
    first = created_token(client.post(reverse("api_token_create"), {"name": "a"}))
    second = created_token(client.post(reverse("api_token_create"), {"name": "a"}))
    assert first != second


def test_it_refuses_a_token_without_a_name(client, researcher):
    client.force_login(researcher)
    response = client.post(reverse("api_token_create"), {"name": ""})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_it_revokes_a_token_and_the_api_refuses_it(client, researcher, token_of):
    value = token_of(researcher)
    token = ApiToken.objects.get(user=researcher)
    client.force_login(researcher)
    response = client.post(reverse("api_token_revoke"), {"token": token.pk}, follow=True)
    assert "Revoked the token test" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert "Revoke</button>" not in response.content.decode()

    answer = client.get("/api/batches", headers={"Authorization": f"Bearer {value}"})
    assert answer.status_code == 401
    assert answer.json() == {"errors": ["this API token was revoked"]}


def test_a_user_cannot_revoke_or_see_someone_elses_token(client, researcher, annotator, token_of):
    token_of(annotator, name="annas-token")
    theirs = ApiToken.objects.get(user=annotator)
    client.force_login(researcher)
    assert "annas-token" not in client.get(reverse("api_tokens")).content.decode()
    response = client.post(reverse("api_token_revoke"), {"token": theirs.pk})
    assert response.status_code == 400
    assert "No such token of yours." in response.content.decode()
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


@pytest.mark.parametrize("value", ["", "x", "12abc"])
def test_a_revoke_without_a_token_number_is_a_clear_error(client, researcher, value):
    client.force_login(researcher)
    response = client.post(reverse("api_token_revoke"), {"token": value})
    assert response.status_code == 400
    assert "No such token of yours." in response.content.decode()


def test_the_page_needs_a_role_and_the_navigation_links_to_it(client, outsider, auditor):
    client.force_login(outsider)
    assert client.get(reverse("api_tokens")).status_code == 403
    assert client.post(reverse("api_token_create"), {"name": "x"}).status_code == 403
    client.force_login(auditor)
    page = client.get(reverse("index")).content.decode()
    assert f'href="{reverse("api_tokens")}"' in page


def test_a_used_token_shows_when_it_was_last_used(client, researcher, token_of):
    value = token_of(researcher)
    assert client.get("/api/batches", headers={"Authorization": f"Bearer {value}"}).status_code == 200
    assert ApiToken.objects.get(user=researcher).last_used_at is not None
