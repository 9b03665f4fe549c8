"""The search page of a batch: hits in task statements, patches and transcript turns."""

from django.http import QueryDict
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from webapp.models import Batch
from webapp.roles import reader_required
from webapp.search import selectors
from webapp.search.forms import SearchForm


def _query(**params) -> str:
    qd = QueryDict(mutable=True)
    qd.update({k: v for k, v in params.items() if v})
    return qd.urlencode()


@require_safe
@reader_required
@vary_on_headers("HX-Request")
def search(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    form = SearchForm(request.GET)
    context = {"batch": batch, "form": form, "min_chars": selectors.MIN_CHARS, "page": None,
               "progress": selectors.index_progress(batch)}
    if form.is_valid() and form.cleaned_data["q"]:
        q, kind, after = form.cleaned_data["q"], form.cleaned_data["kind"], form.cleaned_data["after"]
        page = selectors.search(batch, q, kind=kind, after=after or 0)
        context.update(page=page, after=after, first_query=_query(q=q, kind=kind),
                       next_query=_query(q=q, kind=kind, after=page.next_after) if page.next_after else None,
                       unquoted=_unquoted_query(q, kind) if not page.hits else None)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "search/_hits.html", context)
    return render(request, "search/search.html", context)


def _unquoted_query(q: str, kind: str) -> tuple[str, str] | None:
    """(the query without the quotes around it, its URL query) when `q` is quoted: search finds
    text as typed, and a quoted phrase, as other search boxes take it, finds nothing."""
    for mark in ('"', "'", "“"):
        closing = "”" if mark == "“" else mark
        if len(q) > 2 and q.startswith(mark) and q.endswith(closing):
            inner = q[1:-1].strip()
            return (inner, _query(q=inner, kind=kind)) if inner else None
    return None
