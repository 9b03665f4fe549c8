"""The group page (N-way comparison), the interdiff of two trajectories, and
the pages that load what the group page leaves out of a big patch."""

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from grading.diffs import MARKER_LABELS, interdiff
from webapp import selectors
from webapp.models import Group
from webapp.review import diffview, groupview, matrix
from webapp.review.annotation import RankingPage
from webapp.review.markdown import render_markdown
from webapp.views.access import query_int, reader_required, trajectory_or_404
from webapp.views.annotation_forms import RankingInput
from webapp.views.filters import GroupFilterForm

STATEMENT_CHARS = 200_000  # markdown past this is shown as plain text


def _with_query(url: str, params: dict) -> str:
    qd = QueryDict(mutable=True)
    qd.update({k: v for k, v in params.items() if v})
    return f"{url}?{qd.urlencode()}" if qd else url


def _statement(text: str) -> tuple[str, str]:
    """(safe HTML, plain remainder) of a task statement."""
    return render_markdown(text[:STATEMENT_CHARS]), text[STATEMENT_CHARS:]


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
    prev_pk, next_pk = selectors.neighbours(group, flt)
    nav = {**params, "failing": "hide" if hide_failing else ""}
    first, second = _default_pair(columns)
    statement_html, statement_rest = _statement(group.statement)
    return render(request, "groups/group.html", {
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
        "statement_html": statement_html,
        "statement_rest": statement_rest,
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
        return render(request, "groups/_interdiff.html", context)
    return render(request, "groups/interdiff.html", context)


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
        template = "groups/_hunk_rows.html" if "count" in request.GET else "groups/_file_rows.html"
        return render(request, template, context)
    return render(request, "groups/file.html", context)


@require_GET
@reader_required
def patch_raw(request, pk):
    """The patch exactly as imported, as plain text (never rendered as HTML)."""
    patch = selectors.patches([pk]).get(pk)
    if patch is None:
        raise Http404("no such trajectory")
    response = HttpResponse(patch, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="trajectory-{pk}.diff"'
    return response
