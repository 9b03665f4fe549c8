"""Refused API tokens are counted per client address: past GAGAR_API_TOKEN_FAILURE_LIMIT
within the window, every token from that address gets 429 with Retry-After until the
window ends; other addresses, and calls before the limit, are not touched."""

import time

import pytest

pytestmark = pytest.mark.django_db

BAD = {"Authorization": "Bearer gagar_a-guess"}


@pytest.fixture
def limit(settings):
    settings.GAGAR_API_TOKEN_FAILURE_LIMIT = 3
    settings.GAGAR_API_TOKEN_FAILURE_WINDOW = 60
    return 3


def get(client, headers, address="127.0.0.1", **extra):
    return client.get("/api/batches", headers=headers, REMOTE_ADDR=address, **extra)


def test_past_the_limit_every_token_from_the_address_gets_429_a_valid_one_too(client, researcher, bearer, limit):
    good = bearer(researcher)
    for _ in range(limit):
        assert get(client, BAD).status_code == 401
    refused = get(client, BAD)
    assert refused.status_code == 429
    assert refused.json() == {"errors": [
        f"too many refused API tokens from this address ({limit} within 60 s): every token from it is refused "
        f"for {refused['Retry-After']} s more"]}
    assert 58 <= int(refused["Retry-After"]) <= 60
    # A valid token is refused too, unchecked: else its answer would tell a guesser it was right.
    assert get(client, good).status_code == 429
    # Another address is not throttled.
    assert get(client, good, address="10.0.0.2").status_code == 200
    assert get(client, BAD, address="10.0.0.2").status_code == 401


def test_a_success_resets_nothing_and_does_not_count(client, researcher, bearer, limit):
    good = bearer(researcher)
    for _ in range(limit - 1):
        assert get(client, BAD).status_code == 401
    for _ in range(5):
        assert get(client, good).status_code == 200
    assert get(client, BAD).status_code == 401  # the limit-th refusal: still answered
    assert get(client, good).status_code == 429


def test_a_request_without_a_token_is_not_a_token_attempt(client, limit):
    for _ in range(2 * limit):
        assert get(client, {}).status_code == 401
        assert get(client, {"Authorization": "Basic abc"}).status_code == 401
    assert get(client, BAD).status_code == 401


def test_the_address_may_try_again_once_the_window_has_passed(client, researcher, bearer, settings):
    settings.GAGAR_API_TOKEN_FAILURE_LIMIT = 2
    settings.GAGAR_API_TOKEN_FAILURE_WINDOW = 1.5
    good = bearer(researcher)
    for _ in range(2):
        assert get(client, BAD).status_code == 401
    assert get(client, good).status_code == 429
    time.sleep(1.6)
    assert get(client, good).status_code == 200
    # A new window, counted from zero.
    assert get(client, BAD).status_code == 401
    assert get(client, good).status_code == 200


def test_behind_a_proxy_each_client_is_counted_by_its_forwarded_address(client, researcher, bearer, limit, settings):
    settings.GAGAR_TRUSTED_PROXIES = 1
    good = bearer(researcher)
    for _ in range(limit + 1):
        get(client, BAD, address="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert get(client, good, address="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7").status_code == 429
    # Another client behind the same proxy is not throttled, whatever it puts left of its entry.
    assert get(client, good, address="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7, 203.0.113.8").status_code == 200


def test_the_429_is_documented(limit):
    from webapp.api.endpoints import api

    schema = api.get_openapi_schema()
    for path in schema["paths"].values():
        for operation in path.values():
            assert 429 in operation["responses"], operation["operationId"]
