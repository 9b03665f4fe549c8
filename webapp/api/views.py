"""The API tokens page: a user's tokens, a form to make one (shown once), and revoking one."""

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from webapp.api.forms import TokenForm
from webapp.api.selectors import user_tokens
from webapp.api.services import api_token_create, api_token_revoke
from webapp.models import ApiToken
from webapp.roles import reader_required


@require_safe
@reader_required
def api_tokens(request):
    return _page(request, TokenForm())


@require_POST
@reader_required
def api_token_create_view(request):
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    token, value = api_token_create(user=request.user, name=form.cleaned_data["name"])
    # Rendered, not redirected: the token is shown this once and never stored in a session.
    return _page(request, TokenForm(), created=(token, value))


@require_POST
@reader_required
def api_token_revoke_view(request):
    pk = request.POST.get("token", "")
    try:
        token = api_token_revoke(user=request.user, pk=int(pk))
    except (ValueError, ApiToken.DoesNotExist):
        return _page(request, TokenForm(), error="No such token of yours.", status=400)
    messages.success(request, f"Revoked the token {token.name} ({token.prefix}…).")
    return redirect("api_tokens")


def _page(request, form, *, created=None, error=None, status=200):
    return render(request, "api/tokens.html", {
        "tokens": user_tokens(request.user), "form": form, "created": created, "error": error,
    }, status=status)


def api_not_found(request, path):
    """Any other path under /api/: the API's JSON error shape, not the site's HTML 404 page."""
    return JsonResponse({"errors": [f"no API endpoint at /api/{path}: see /api/docs"]}, status=404)
