"""The group page, composed: the comparison (`review`), the ranking section (`annotation`'s
panel) and the list it was opened from (`batches`' filter), for every feature that shows it.

The review feature shows it as is, annotation's save view shows it again with a refused
ranking and its error, and the auditor's page extends it. Composed here, above the
features, so that none of them imports another's views: this module imports their parts,
and only views import it.
"""

from __future__ import annotations

from django.db.models import JSONField, OuterRef, Subquery
from django.http import QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from grading.diffs import MARKER_LABELS
from webapp.annotation.forms import RankingInput
from webapp.annotation.panel import RankingPage
from webapp.batches import selectors as listing
from webapp.batches.forms import GroupFilterForm
from webapp.evidence.selectors import evidence_panel
from webapp.html.markdown import statement
from webapp.models import Annotation, Group, Lease
from webapp.rankings import Viewer
from webapp.review import columns as layout
from webapp.review import comparison, matrix, selectors
from webapp.review.summary import ROWS_PER_PAGE, summary_page, summary_start
from webapp.triage import visible_triage

STATEMENT_LINES = 3  # a long statement shows this many lines, then "show the whole statement"


def group_for_page(pk: int, user) -> Group:
    """A group with its batch and annotation policy, and, in the same query, who holds a
    lease on it and the latest ranking `user` made of it (my_version, my_tiers)."""
    now = timezone.now()
    live = Lease.objects.filter(group=OuterRef("pk"), completed_at=None, expires_at__gt=now)
    others = live.exclude(user=user).order_by("expires_at")
    mine = Annotation.objects.filter(group=OuterRef("pk"), user=user, kind=Annotation.Kind.RANKING).order_by("-version")
    return get_object_or_404(
        Group.objects.select_related("batch", "batch__annotation_policy", "evidence").annotate(
            my_lease_until=Subquery(live.filter(user=user).values("expires_at")[:1]),
            held_by=Subquery(others.values("user__username")[:1]),
            held_until=Subquery(others.values("expires_at")[:1]),
            my_version=Subquery(mine.values("version")[:1]),
            my_tiers=Subquery(mine.values("tiers")[:1], output_field=JSONField()),
        ),
        pk=pk,
    )


def render_group_page(request, group, *, submitted: RankingInput | None = None, error: str = "", status: int = 200,
                      template: str = "review/group.html", context: dict | None = None):
    """The group page; a refused save shows it again with the ranking as sent and the error.
    A page built on it (the auditor's page) names its `template`, which extends the group
    page's, and adds its `context`.
    The query string holds the list filter (for next/previous), "hide failing" and the
    matrix's layout (review.columns)."""
    viewer = Viewer(request.user)
    flt = GroupFilterForm(request.GET, columns=visible_triage(group.batch, viewer=viewer).columns).to_filter()
    params = flt.params()
    hide_failing = request.GET.get("failing") == "hide"
    paged = layout.paged(group.n_trajectories)
    trajectories = selectors.group_members(group) if paged else selectors.group_trajectories(group)
    ranking = RankingPage.load(request.user, group, trajectories, submitted=submitted, error=error)
    reference = comparison.reference_render(group)
    choice = layout.parse(request.GET, {t.pk: t.trajectory_id for t in trajectories},
                          has_reference=reference is not None)
    window = summary = None
    if paged:  # the columns of one page are read, parsed and laid out; the table lists every trajectory
        everyone = layout.default_order(trajectories, ranking.final)
        window = layout.window(everyone, choice)
        summary = summary_page(everyone, summary_start(request.GET.get("rows")), choice=choice, window=window,
                               advantages=ranking.advantages, read_facts=selectors.trajectory_facts)
        trajectories = selectors.group_trajectories(group, pks=window.pks)
    columns, rows = comparison.build(trajectories, ranking.advantages)
    ranking.attach(columns)
    ordered = layout.default_order(columns, ranking.final)
    shown = layout.arrange(ordered, rows, choice, reference)
    prev_pk, next_pk = listing.neighbours(group, flt, viewer=viewer)
    transcripts = selectors.with_transcripts(c.trajectory.pk for c in ordered)  # links only where there is one
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
        "statement_folds": _folds(group.statement),
        "reference": reference,
        "pair": (first, second),
        "with_transcript": transcripts,
        "transcript_columns": [c for c in ordered if c.trajectory.pk in transcripts],
        "n_without_transcript": len(ordered) - len(transcripts),
        "marker_labels": sorted(MARKER_LABELS.items()),
        "ranking": ranking,
        "evidence": evidence_panel(group),
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


def _with_query(url: str, params: dict) -> str:
    """`url` with `params` as its query: a list value repeats its key; empty values are left out."""
    qd = QueryDict(mutable=True)
    for key, value in params.items():
        values = value if isinstance(value, list) else [value]
        if any(values):
            qd.setlist(key, [v for v in values if v])
    return f"{url}?{qd.urlencode()}" if qd else url


def _folds(text: str) -> bool:
    """Whether a statement is long enough to fold to its first lines, so that the matrix under it
    starts in the first screen. Counted in the text, not as drawn: a wrong guess shows a "more"
    that opens little, and never clips a statement without one."""
    return text.count("\n") >= STATEMENT_LINES or len(text) > STATEMENT_LINES * 80


def _default_pair(columns):
    """The interdiff preselected: the first passing column and the next one whose change differs
    from it (passing first), else the best we have: two identical patches show nothing."""
    ordered = [c for c in columns if c.passed] + [c for c in columns if not c.passed]
    if len(ordered) < 2:
        return (ordered + [None, None])[:2]
    first = ordered[0]
    second = next((c for c in ordered[1:] if c.view.key != first.view.key), ordered[1])
    return first, second


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
        "auto_narrow_media": layout.AUTO_NARROW_MEDIA,
        # Narrow's toggle turns it off to wide columns: without a density a narrow window picks narrow again.
        "layout_links": {"reference": url(reference=not choice.reference),
                         "compact": url(density="" if choice.compact else "compact"),
                         "narrow": url(density="wide" if choice.narrow else "narrow"),
                         "wide": url(density="wide"),
                         "wrap": url(wrap=not choice.wrap), "reset": _with_query(path, here)},
        "hidden_fields": [(key, value) for key, value in [*kept.items(), *others] if value],
    }
