"""Who a login attempt comes from, for the throttle on failed logins (django-axes,
configured in settings): the account as typed and the client's address."""

import ipaddress

from django.conf import settings

USERNAME_STORED = 255  # the length of axes' username column; no account's name is longer (Django's: 150)


def attempted_username(request, credentials) -> str:
    """The username failures are counted under. A longer one than any account's
    is cut, not stored whole: the database would refuse it."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    return username[:USERNAME_STORED]


def client_address(request) -> str | None:
    """The client's IP address. Behind GAGAR_TRUSTED_PROXIES proxies, each
    appending the address it was called from to X-Forwarded-For, it is the entry
    the outermost proxy appended: entries left of it are the client's own word.
    A request that came past the proxies, or whose entry there is no address,
    is counted under its sender, REMOTE_ADDR (None for a request made in-process:
    the test client's force_login)."""
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    proxies = settings.GAGAR_TRUSTED_PROXIES
    if proxies and len(forwarded) >= proxies and _is_address(forwarded[-proxies]):
        return forwarded[-proxies]
    return request.META.get("REMOTE_ADDR")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
