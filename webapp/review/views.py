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
from webapp.rankings import Viewer
from webapp.review import columns as layout
from webapp.review import diffview, groupview, matrix, selectors, transcripts
from webapp.review.markdown import statement
from webapp.review.selectors import trajectory_or_404
from webapp.review.summary import ROWS_PER_PAGE, summary_page, summary_start
from webapp.roles import reader_required
from webapp.triage import triage_columns

QUERY_INT_MAX = 2**31 - 1  # past any turn, part offset or patch row; what every database takes


def query_int(value, default=0) -> int:
    """An integer from a query parameter, clamped to 0..QUERY_INT_MAX; `default`
    when it is missing or not a number."""
    try:
        return min(max(0, int(value)), QUERY_INT_MAX)
    except (TypeError, ValueError):
        return default


def _with_query(url: str, params: dict) -> str:
    """`url` with `params` as its query: a list value repeats its key; empty values are left out."""
    qd = QueryDict(mutable=True)
    for key, value in params.items():
        values = value if isinstance(value, list) else [value]
        if any(values):
            qd.setlist(key, [v for v in values if v])
    return f"{url}?{qd.urlencode()}" if qd else url


def _default_pair(columns):
    """The interdiff preselected: the first two passing, else the best we have."""
    ordered = [c for c in columns if c.passed] + [c for c in columns if not c.passed]
    return (ordered + [None, None])[:2]


def _toggle(items, item) -> set:
    return set(items) ^ {item}


def _layout_controls(path: str, here: dict, choice: layout.Choice, ordered, shown: layout.Layout) -> dict:
    """What the matrix's layout controls need: links that change one thing of `choice` and
    keep the rest of the query (`here`), and the picker form's hidden fields."""

    def url(**changes) -> str:
        return _with_query(path, {**here, **choice.params(**changes)})

    kept = {**here, **choice.carried()}  # all strings: the pins and hides are the form's own boxes
    listed = {c.trajectory.pk for c in ordered}
    # A paged group lists one page of columns: the pins and hides of the others ride along, and the page stays.
    others = [("pin", str(pk)) for pk in choice.pinned if pk not in listed] + [
        ("hide", str(pk)) for pk in sorted(choice.hidden) if pk not in listed] + [("cols", choice.params()["cols"])]
    return {
        "choice": choice,
        "max_pinned": layout.MAX_PINNED,
        "n_pinned": len(shown.pinned),
        "column_links": {c.trajectory.pk: {"pin": url(pinned=_toggle(choice.pinned, c.trajectory.pk)),
                                           "hide": url(hidden=_toggle(choice.hidden, c.trajectory.pk))}
                         for c in ordered},
        "layout_links": {"reference": url(reference=not choice.reference), "compact": url(compact=not choice.compact),
                         "wrap": url(wrap=not choice.wrap), "reset": _with_query(path, here)},
        "hidden_fields": [(key, value) for key, value in [*kept.items(), *others] if value],
    }


@require_GET
@reader_required
def group(request, pk):
    return render_group_page(request, selectors.group_for_page(pk, request.user))


def render_group_page(request, group, *, submitted: RankingInput | None = None, error: str = "", status: int = 200,
                      template: str = "review/group.html", context: dict | None = None):
    """The group page; a refused save shows it again with the ranking as sent and the error.
    A page built on it (the auditor's page) names its `template`, which extends the group
    page's, and adds its `context`.
    The query string holds the list filter (for next/previous), "hide failing" and the
    matrix's layout (review.columns)."""
    viewer = Viewer(request.user)
    flt = GroupFilterForm(request.GET, columns=triage_columns(viewer, group.batch)).to_filter()
    params = flt.params()
    hide_failing = request.GET.get("failing") == "hide"
    paged = layout.paged(group.n_trajectories)
    trajectories = selectors.group_members(group) if paged else selectors.group_trajectories(group)
    ranking = RankingPage.load(request.user, group, trajectories, submitted=submitted, error=error)
    reference = groupview.reference_view(group)
    choice = layout.parse(request.GET, {t.pk: t.trajectory_id for t in trajectories},
                          has_reference=reference is not None)
    window = summary = None
    if paged:  # the columns of one page are read, parsed and laid out; the table lists every trajectory
        everyone = layout.default_order(trajectories, ranking.final)
        window = layout.window(everyone, choice)
        summary = summary_page(everyone, summary_start(request.GET.get("rows")), choice=choice, window=window,
                               advantages=ranking.advantages, read_facts=selectors.trajectory_facts)
        trajectories = selectors.group_trajectories(group, pks=window.pks)
    columns, rows = groupview.build(trajectories, ranking.advantages)
    ranking.attach(columns)
    ordered = layout.default_order(columns, ranking.final)
    shown = layout.arrange(ordered, rows, choice, reference)
    prev_pk, next_pk = listing.neighbours(group, flt, viewer=viewer)
    here = {**params, "failing": "hide" if hide_failing else ""}
    nav = {**here, **choice.carried()}
    first, second = _default_pair(ordered)
    return render(request, template, {
        **(context or {}),
        "group": group,
        "batch": group.batch,
        "columns": shown.columns,
        "matrix_columns": shown.matrix_columns,
        "all_columns": ordered,
        "n_trajectories": window.n_trajectories if paged else len(ordered),
        "rows": shown.rows,
        "counts": shown.counts,
        "matrix_body": matrix.render_body(shown.rows, len(shown.columns), paged=paged),
        "n_passing": sum(t.passed for t in (everyone if paged else columns)),
        "order_note": layout.order_note(ranking.final, hidden=ranking.seen.hide_grader or ranking.seen.hide_others),
        **_layout_controls(request.path, here, choice, ordered, shown),
        **(_pages(request.path, here, choice, window, summary) if paged else {}),
        "paged": paged,
        "hide_failing": hide_failing,
        "toggle_failing_url": _with_query(request.path, {**params, "failing": "" if hide_failing else "hide",
                                                         **choice.params()}),
        "batch_url": _with_query(reverse("batch", args=[group.batch_id]), params),
        "prev_url": _with_query(reverse("group", args=[prev_pk]), nav) if prev_pk else None,
        "next_url": _with_query(reverse("group", args=[next_pk]), nav) if next_pk else None,
        "statement": statement(group.statement),
        "reference": reference,
        "pair": (first, second),
        "marker_labels": sorted(MARKER_LABELS.items()),
        "ranking": ranking,
    }, status=status)


def _pages(path: str, here: dict, choice: layout.Choice, window: layout.Window, summary) -> dict:
    """What a paged group's pagers and table need: links to the matrix's pages and the table's,
    and per row of the table, to the matrix page that shows it and to pin it."""

    def url(rows: int = 0, **changes) -> str:
        return _with_query(path, {**here, **choice.params(**changes), "rows": str(rows) if rows else ""})

    room = len([pk for pk in choice.pinned if pk not in choice.hidden]) < layout.MAX_PINNED
    return {
        "window": window,
        "summary": summary,
        "columns_per_page": layout.COLUMNS_PER_PAGE,
        "summary_rows_per_page": ROWS_PER_PAGE,
        "max_columns": layout.MAX_COLUMNS,
        "column_pages": {"previous": None if window.previous is None else url(summary.start, start=window.previous),
                         "next": None if window.next is None else url(summary.start, start=window.next)},
        "summary_pages": {"previous": None if summary.previous is None else url(summary.previous),
                          "next": None if summary.next is None else url(summary.next)},
        "summary_links": {row.member.pk: {
            "show": (None if row.column_start is None
                     else f"{url(summary.start, start=row.column_start)}#t-{row.member.pk}"),
            "pin": url(summary.start, pinned=(*choice.pinned, row.member.pk)) if room and not row.pinned else None,
            "unhide": url(summary.start, hidden=choice.hidden - {row.member.pk}) if row.hidden else None,
        } for row in summary.rows},
    }


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def group_interdiff(request, pk):
    group = get_object_or_404(Group.objects.select_related("batch"), pk=pk)
    try:
        pks = int(request.GET["a"]), int(request.GET["b"])
    except (KeyError, ValueError):
        raise Http404("choose two trajectories of this group") from None
    if not all(0 < pk < 2**63 for pk in pks):  # past the id column's range: no such trajectory
        raise Http404("choose two trajectories of this group")
    # a paged group's page offers the two alone: a select of tens of thousands would be the page
    paged = layout.paged(group.n_trajectories)
    trajectories = {t.pk: t for t in selectors.group_trajectories(group, pks=pks if paged else None)}
    try:
        a, b = trajectories[pks[0]], trajectories[pks[1]]
    except KeyError:
        raise Http404("choose two trajectories of this group") from None
    views = groupview.load_views([a, b])
    files = interdiff(views[a.pk].full, views[b.pk].full)
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
    html, next_start = diffview.file_rows(view.file_diff(path), start, min(count, diffview.PAGE_LINES) or 1)
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
        if start and request.htmx.target != "transcript":  # the group page's panel loads at a search hit's turn
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
