"""Every named URL pattern of the project, for the tests that walk them all."""

from django.urls import URLPattern, URLResolver, get_resolver

PUBLIC = {"login", "logout"}


def url_patterns(resolvers=None, prefix=""):
    """(name, route) of every named URL pattern outside the admin, the API and the login pages."""
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace in ("admin", "api"):  # the API answers 401/403 in JSON: tests/webapp/api
                continue
            yield from url_patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and entry.name and entry.name not in PUBLIC:
            yield entry.name, prefix + str(entry.pattern)
