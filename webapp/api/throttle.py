"""Failed API token attempts, counted per client address in Django's cache.

An address's window opens at its first refused token and lasts
GAGAR_API_TOKEN_FAILURE_WINDOW seconds. Once GAGAR_API_TOKEN_FAILURE_LIMIT tokens
from it were refused in the window, every token it presents, a valid one too, is
refused (429) until the window ends: answering a valid token then would tell a
guesser which guess was right. A success resets nothing, or one valid token would
let its holder guess on without end. The address is the login throttle's
(`webapp.logins.client_address`: REMOTE_ADDR, or X-Forwarded-For behind
GAGAR_TRUSTED_PROXIES).

The count lives in the default cache: with the default local-memory cache each
server process counts on its own, so gunicorn's `--workers 4` lets an address fail
up to 4 x the limit per window.
"""

import math
import time

from django.conf import settings
from django.core.cache import cache

PREFIX = "gagar:api-token-failures"


def retry_after(address: str | None) -> int | None:
    """Seconds until `address` may present tokens again; None when it may now."""
    start = cache.get(_window_key(address))
    if start is None:
        return None
    if cache.get(_count_key(address, start), 0) < settings.GAGAR_API_TOKEN_FAILURE_LIMIT:
        return None
    left = start + settings.GAGAR_API_TOKEN_FAILURE_WINDOW - time.time()
    return math.ceil(left) if left > 0 else None


def failed(address: str | None) -> None:
    """Count one refused token from `address`, opening its window if none is open."""
    window = settings.GAGAR_API_TOKEN_FAILURE_WINDOW
    now = time.time()
    cache.add(_window_key(address), now, timeout=window)
    start = cache.get(_window_key(address), now)  # `now` if the window closed just now
    # The count is keyed by its window's start: a new window starts from zero however
    # a cache keeps (or resets) the count's own expiry on incr.
    key = _count_key(address, start)
    if not cache.add(key, 1, timeout=window):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=window)


def _window_key(address: str | None) -> str:
    return f"{PREFIX}:{address}:start"


def _count_key(address: str | None, start: float) -> str:
    return f"{PREFIX}:{address}:{start:.6f}"
