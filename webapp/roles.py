"""Roles are Django auth groups; a user may hold several. Superusers hold all."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

RESEARCHER = "researcher"
ANNOTATOR = "annotator"
AUDITOR = "auditor"
ROLES = (RESEARCHER, ANNOTATOR, AUDITOR)


def has_role(user, *roles: str) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return any(name in roles for name in user_roles(user))


def user_roles(user) -> set[str]:
    """The user's role names, read once per request object."""
    if not hasattr(user, "_gagar_roles"):
        user._gagar_roles = set(user.groups.values_list("name", flat=True))
    return user._gagar_roles


def role_required(*roles: str):
    """Login required (anonymous users are redirected), then 403 unless the user has one of `roles`."""

    def decorator(view):
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not has_role(request.user, *roles):
                raise PermissionDenied(f"needs the role {' or '.join(roles)}")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


# Everyone with a role reads batches, groups and transcripts; what they may
# change (grading, rankings, audits) is decided by the views that change it.
reader_required = role_required(*ROLES)
annotator_required = role_required(RESEARCHER, ANNOTATOR)


def may_annotate(user) -> bool:
    return has_role(user, RESEARCHER, ANNOTATOR)


# Exports carry the grader's rankings, which blind review hides from annotators: the files,
# their launch and their list are for researchers only (the pages and the API ask these).
EXPORT_ROLES = (RESEARCHER,)
export_required = role_required(*EXPORT_ROLES)


def may_export(user) -> bool:
    return has_role(user, *EXPORT_ROLES)


# Who opens the audit pages.
AUDIT_ROLES = (AUDITOR, RESEARCHER)
# The top bar's links: label, URL name and the roles whose views open the page.
NAV = (("Batches", "index", ROLES), ("Runs", "runs", ROLES), ("API tokens", "api_tokens", ROLES),
       ("Audit", "audit_sets", AUDIT_ROLES))


def nav_links(user) -> list[tuple[str, str]]:
    """(label, URL name) of the top bar's links that `user` may open: no link to a 403."""
    return [(label, name) for label, name, roles in NAV if has_role(user, *roles)]
