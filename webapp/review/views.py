"""The group page (N-way comparison), the interdiff of two trajectories, the
pages that load what the group page leaves out of a big patch, and transcripts,
loaded on demand: a page of turns, and the whole of one long part."""

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from grading.diffs import MARKER_LABELS
from grading.interdiff import interdiff
from webapp.annotation.forms import RankingInput
from webapp.annotation.panel import RankingPage
from webapp.batches import selectors as listing
from webapp.batches.forms import GroupFilterForm
from webapp.models import Group
from webapp.review import diffview, groupview, matrix, selectors, transcripts
from webapp.review.markdown import statement
from webapp.review.selectors import trajectory_or_404
from webapp.roles import reader_required

QUERY_INT_MAX = 2**31 - 1  # past any turn, part offset or patch row; what every database takes


def query_int(value, default=0) -> int:
    """An integer from a query parameter, clamped to 0..QUERY_INT_MAX; `default`
    when it is missing or not a number."""
    try:
        return min(max(0, int(value)), QUERY_INT_MAX)
    except (TypeError, ValueError):
        return default


def _with_query(url: str, params: dict) -> str:
    qd = QueryDict(mutable=True)
    qd.update({k: v for k, v in params.items() if v})
    return f"{url}?{qd.urlencode()}" if qd else url


def _default_pair(columns):
    """The interdiff preselected: the first two passing, else the best we have."""
    ordered = [c for c in columns if c.passed] + [c for c in columns if not c.passed]
    return (ordered + [None, None])[:2]


@require_GET
@reader_required
def group(request, pk):
    return render_group_page(request, selectors.group_for_page(pk, request.user))


def render_group_page(request, group, *, submitted: RankingInput | None = None, error: str = "", status: int = 200):
    """The group page; a refused save shows it again with the ranking as sent and the error."""
    flt = GroupFilterForm(request.GET).to_filter()
    params = flt.params()
    hide_failing = request.GET.get("failing") == "hide"
    trajectories = selectors.group_trajectories(group)
    ranking = RankingPage.load(request.user, group, trajectories, submitted=submitted, error=error)
    columns, rows = groupview.build(trajectories, ranking.advantages)
    ranking.attach(columns)
    prev_pk, next_pk = listing.neighbours(group, flt)
    nav = {**params, "failing": "hide" if hide_failing else ""}
    first, second = _default_pair(columns)
    return render(request, "review/group.html", {
        "group": group,
        "batch": group.batch,
        "columns": columns,
        "rows": rows,
        "matrix_body": matrix.render_body(rows, len(columns)),
        "n_passing": sum(c.passed for c in columns),
        "hide_failing": hide_failing,
        "toggle_failing_url": _with_query(request.path, {**params, "failing": "" if hide_failing else "hide"}),
        "batch_url": _with_query(reverse("batch", args=[group.batch_id]), params),
        "prev_url": _with_query(reverse("group", args=[prev_pk]), nav) if prev_pk else None,
        "next_url": _with_query(reverse("group", args=[next_pk]), nav) if next_pk else None,
        "statement": statement(group.statement),
        "reference": diffview.patch_view(group.reference_patch, lazy=False) if group.reference_patch else None,
        "pair": (first, second),
        "marker_labels": sorted(MARKER_LABELS.items()),
        "ranking": ranking,
    }, status=status)


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def group_interdiff(request, pk):
    group = get_object_or_404(Group.objects.select_related("batch"), pk=pk)
    trajectories = {t.pk: t for t in selectors.group_trajectories(group)}
    try:
        a, b = trajectories[int(request.GET["a"])], trajectories[int(request.GET["b"])]
    except (KeyError, ValueError):
        raise Http404("choose two trajectories of this group") from None
    views = groupview.load_views([a, b])
    files = interdiff(views[a.pk].parsed, views[b.pk].parsed)
    context = {"group": group, "batch": group.batch, "a": a, "b": b, "files": files,
               "trajectories": trajectories.values(), "changed": sum(f.status != "same" for f in files)}
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "review/_interdiff.html", context)
    return render(request, "review/interdiff.html", context)


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def patch_file(request, pk):
    """Rows of one file of a trajectory's patch from `start`: what the group page left out."""
    trajectory = trajectory_or_404(pk)
    view = groupview.load_views([trajectory])[trajectory.pk]
    path = request.GET.get("path", "")
    fv = view.files.get(path)
    if fv is None:
        raise Http404("no such file in this patch")
    start, count = query_int(request.GET.get("start"), 0), query_int(request.GET.get("count"), diffview.PAGE_LINES)
    html, next_start = diffview.file_rows(fv.diff, start, min(count, diffview.PAGE_LINES) or 1)
    context = {"trajectory": trajectory, "group": trajectory.group, "file": fv, "path": path,
               "html": html, "start": start, "next_start": next_start}
    if request.htmx and not request.htmx.history_restore_request:
        # a collapsed hunk asks for exactly its lines; "load the rest" for a page and a link to more
        template = "review/_hunk_rows.html" if "count" in request.GET else "review/_file_rows.html"
        return render(request, template, context)
    return render(request, "review/file.html", context)


@require_GET
@reader_required
def patch_raw(request, pk):
    """The patch exactly as imported, as plain text (never rendered as HTML)."""
    patch = selectors.patch(pk)
    if patch is None:
        raise Http404("no such trajectory")
    response = HttpResponse(patch, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="trajectory-{pk}.diff"'
    return response


# --- transcripts ------------------------------------------------------------------------


def _page(pk, start, query):
    """A page of turns, or None without a transcript. Only a search reads it all."""
    if query:
        messages = selectors.transcript_messages(pk)
        return None if messages is None else transcripts.search_page(messages, query, start=start)
    found = selectors.transcript_slice(pk, start, start + transcripts.TURNS_PER_PAGE)
    return None if found is None else transcripts.turn_page(*found, start=start)


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def transcript(request, pk):
    trajectory = trajectory_or_404(pk)
    query = request.GET.get("q", "").strip()[:200]
    start = query_int(request.GET.get("start"))
    page = _page(pk, start, query)
    context = {"trajectory": trajectory, "group": trajectory.group, "page": page, "q": query, "start": start}
    if request.htmx and not request.htmx.history_restore_request:
        # "next turns" appends turns, the search form replaces the results, a first load the panel
        if start:
            template = "review/_turns.html"
        elif request.htmx.target == f"turns-{pk}":
            template = "review/_results.html"
        else:
            template = "review/_transcript.html"
        return render(request, template, context)
    return render(request, "review/transcript.html", context)


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def transcript_part(request, pk, index, part):
    trajectory = trajectory_or_404(pk)
    found = selectors.transcript_slice(pk, index, index + 1)
    if not found or not found[1]:
        raise Http404("no such turn")
    query = request.GET.get("q", "").strip()[:200]
    offset = query_int(request.GET.get("offset"))
    chunk = transcripts.part_chunk(found[1][0], part, offset, query)
    if chunk is None:
        raise Http404("no such part")
    html, next_offset = chunk
    context = {"trajectory": trajectory, "group": trajectory.group, "index": index, "part": part,
               "html": html, "offset": offset, "next_offset": next_offset, "q": query}
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "review/_part.html", context)
    return render(request, "review/part.html", context)
