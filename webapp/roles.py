"""Roles are Django auth groups; a user may hold several."""

RESEARCHER = "researcher"
ANNOTATOR = "annotator"
AUDITOR = "auditor"
ROLES = (RESEARCHER, ANNOTATOR, AUDITOR)


def has_role(user, *roles: str) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name__in=roles).exists()
