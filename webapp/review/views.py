"""The group page (N-way comparison), the interdiff of two trajectories, the
pages that load what the group page leaves out of a big patch, and transcripts,
loaded on demand: a page of turns, and the whole of one long part."""

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from grading.interdiff import interdiff
from webapp.grouppage import group_for_page, render_group_page
from webapp.html import patches, transcripts
from webapp.models import Group
from webapp.params import query_int
from webapp.review import columns as layout
from webapp.review import comparison, selectors
from webapp.review.selectors import trajectory_or_404
from webapp.roles import reader_required


@require_safe
@reader_required
def group(request, pk):
    return render_group_page(request, group_for_page(pk, request.user))


@require_safe
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
    views = comparison.load_views([a, b])
    files = interdiff(views[a.pk].full, views[b.pk].full)
    context = {"group": group, "batch": group.batch, "a": a, "b": b, "files": files,
               "trajectories": trajectories.values(), "changed": sum(f.status != "same" for f in files)}
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "review/_interdiff.html", context)
    return render(request, "review/interdiff.html", context)


@require_safe
@reader_required
@vary_on_headers("HX-Request")
def patch_file(request, pk):
    """Rows of one file of a trajectory's patch from `start`: what the group page left out."""
    trajectory = trajectory_or_404(pk)
    view = comparison.load_views([trajectory])[trajectory.pk]
    path = request.GET.get("path", "")
    fv = view.files.get(path)
    if fv is None:
        raise Http404("no such file in this patch")
    start, count = query_int(request.GET.get("start"), 0), query_int(request.GET.get("count"), patches.PAGE_LINES)
    html, next_start = patches.file_rows(view.file_diff(path), start, min(count, patches.PAGE_LINES) or 1)
    context = {"trajectory": trajectory, "group": trajectory.group, "file": fv, "path": path,
               "html": html, "start": start, "next_start": next_start}
    if request.htmx and not request.htmx.history_restore_request:
        # a collapsed hunk asks for exactly its lines; "load the rest" for a page and a link to more
        template = "review/_hunk_rows.html" if "count" in request.GET else "review/_file_rows.html"
        return render(request, template, context)
    return render(request, "review/file.html", context)


@require_safe
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


@require_safe
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


@require_safe
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
