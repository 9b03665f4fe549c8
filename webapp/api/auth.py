"""Who calls the API: `Authorization: Bearer <token>`, a token a user made on the tokens page.

The token's user acts with their roles (`webapp.roles`), the same roles the web pages check.
Refused tokens are counted per client address (`webapp.api.throttle`): past the limit, every
token from that address is refused with 429 until its window ends.
"""

from django.conf import settings
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security import HttpBearer

from webapp.api import throttle
from webapp.api.selectors import token_by_value
from webapp.api.services import api_token_touch
from webapp.logins import client_address
from webapp.roles import EXPORT_ROLES, RESEARCHER, ROLES, has_role

READER = ROLES  # a batch's list and status, as on the batch pages
GRADER = (RESEARCHER,)  # uploads, grading, online steps: as launching grading on the batch page
EXPORTER = EXPORT_ROLES  # advantages and exports carry the grader's rankings, as export downloads do


class TooManyAttempts(HttpError):
    """429: the caller's address presented too many refused tokens; `retry_after` seconds to wait."""

    def __init__(self, retry_after: int):
        limit, window = settings.GAGAR_API_TOKEN_FAILURE_LIMIT, settings.GAGAR_API_TOKEN_FAILURE_WINDOW
        super().__init__(429, f"too many refused API tokens from this address ({limit} within {window:g} s): "
                              f"every token from it is refused for {retry_after} s more")
        self.retry_after = retry_after


class TokenAuth(HttpBearer):
    """Every refusal says why (401): no header, not a bearer token, unknown or revoked token;
    429 for every token from an address that presented too many refused ones."""

    def __call__(self, request):
        header = request.headers.get(self.header, "")
        if not header:
            raise AuthenticationError(message="no Authorization header: send 'Authorization: Bearer <token>'")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != self.openapi_scheme or not value.strip():
            raise AuthenticationError(message="the Authorization header must be 'Bearer <token>'")
        address = client_address(request)
        wait = throttle.retry_after(address)
        if wait is not None:
            raise TooManyAttempts(wait)
        try:
            return self.authenticate(request, value.strip())
        except AuthenticationError:
            throttle.failed(address)
            raise

    def authenticate(self, request, token):
        found = token_by_value(token)
        if found is None:
            raise AuthenticationError(message="unknown API token")
        if found.revoked_at is not None:
            raise AuthenticationError(message="this API token was revoked")
        if not found.user.is_active:
            raise AuthenticationError(message="this API token's user is inactive")
        api_token_touch(found)
        request.user = found.user
        return found.user


def require(request, roles: tuple[str, ...]) -> None:
    """403 unless the caller holds one of `roles` (READER, GRADER or EXPORTER)."""
    if not has_role(request.auth, *roles):
        raise AuthorizationError(message=f"needs the role {' or '.join(roles)}")
