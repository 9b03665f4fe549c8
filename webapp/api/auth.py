"""Who calls the API: `Authorization: Bearer <token>`, a token a user made on the tokens page.

The token's user acts with their roles (`webapp.roles`), the same roles the web pages check.
"""

from ninja.errors import AuthenticationError, AuthorizationError
from ninja.security import HttpBearer

from webapp.api.selectors import token_by_value
from webapp.api.services import api_token_touch
from webapp.roles import EXPORT_ROLES, RESEARCHER, ROLES, has_role

READER = ROLES  # a batch's list and status, as on the batch pages
GRADER = (RESEARCHER,)  # uploads, grading, online steps: as launching grading on the batch page
EXPORTER = EXPORT_ROLES  # advantages and exports carry the grader's rankings, as export downloads do


class TokenAuth(HttpBearer):
    """Every refusal says why (401): no header, not a bearer token, unknown or revoked token."""

    def __call__(self, request):
        header = request.headers.get(self.header, "")
        if not header:
            raise AuthenticationError(message="no Authorization header: send 'Authorization: Bearer <token>'")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != self.openapi_scheme or not value.strip():
            raise AuthenticationError(message="the Authorization header must be 'Bearer <token>'")
        return self.authenticate(request, value.strip())

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
