"""Transcripts, loaded on demand: a page of turns, and the whole of one long part."""

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from webapp import selectors
from webapp.review import transcripts
from webapp.views.access import query_int, reader_required, trajectory_or_404


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
            template = "transcripts/_turns.html"
        elif request.htmx.target == f"turns-{pk}":
            template = "transcripts/_results.html"
        else:
            template = "transcripts/_transcript.html"
        return render(request, template, context)
    return render(request, "transcripts/transcript.html", context)


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
        return render(request, "transcripts/_part.html", context)
    return render(request, "transcripts/part.html", context)
