"""Tokens for the API tests, and the worker fixtures for the round trips.

App modules are imported inside the fixtures (see tests/conftest.py)."""

import pytest

from tests.workers.conftest import redis_broker, workers  # noqa: F401


@pytest.fixture(autouse=True)
def forget_refused_tokens():
    """Refused tokens are counted per address in the process's cache (webapp/api/throttle.py),
    and every test calls from 127.0.0.1: one test's refusals must not throttle the next."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def token_of():
    """`token_of(user)`: a fresh API token of `user`, the value a client sends."""
    from webapp.api.services import api_token_create

    def make(user, name="test"):
        return api_token_create(user=user, name=name)[1]

    return make


@pytest.fixture
def bearer(token_of):
    """`bearer(user)`: the headers of a call made with a fresh token of `user`."""
    return lambda user: {"Authorization": f"Bearer {token_of(user)}"}
