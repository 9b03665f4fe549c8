"""Security headers that Django does not set by itself, and error pages of the site."""

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.views.defaults import page_not_found

CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "form-action 'self'",
))


def content_security_policy(get_response):
    """Every response gets a CSP with no inline script or style: the pages show
    untrusted patches and transcripts, so markup that slips through escaping
    still cannot run."""

    def middleware(request):
        response = get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response

    return middleware


class SitePages:
    """A missing page and a form's address opened as a page answer with pages of the site.

    Under DEBUG (`make demo`) Django answers a 404 with its technical page, which lists every
    URL of the site; the site's own page says what is missing in its words, so it is used
    with DEBUG on too. A POST-only view (`@require_POST`) answers a GET, such as a reload
    of the page a refused form left, with an empty 405: the site's 405 page says so and
    links to the page above it, where the form lives."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 405 and not response.content:
            return _not_allowed(request, response["Allow"])
        if settings.DEBUG and response.status_code == 404 and request.resolver_match is None:
            return page_not_found(request, Resolver404({"path": request.path_info}))
        return response

    def process_exception(self, request, exception):
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


def _not_allowed(request, allowed: str):
    response = render(request, "405.html", {"allowed": allowed, "back": _page_above(request.path_info)},
                      status=405)
    response["Allow"] = allowed
    return response


def _page_above(path: str) -> str:
    """The nearest address above `path` that is a page: /audit/items/7/ for
    /audit/items/7/verdict/, / (the batches, with the import form) for /batches/import/."""
    parts = path.strip("/").split("/")
    while parts:
        parts.pop()
        above = "/" + "".join(f"{part}/" for part in parts)
        try:
            resolve(above)
        except Resolver404:
            continue
        return above
    return "/"
