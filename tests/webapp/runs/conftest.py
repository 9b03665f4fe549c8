"""The run pages keep drawn figures in the process's cache: each test starts without them."""

import pytest


@pytest.fixture(autouse=True)
def no_drawn_figures():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
