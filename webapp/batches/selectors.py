"""Reads of the batches pages: the list of batches, and one batch's groups.

Listing a batch's groups uses keyset pagination over an indexed sort key
((batch, group_id) is unique; (batch, pass_rate, id), (batch, label, id),
(batch, grading_confidence, id), (batch, agreement, id) and (batch, lines_over_shortest, id)
are indexed), so
page 2,000 of 100,000 groups costs what page 1 does. Groups without a value of a
nullable sort key (no grading, no human ranking) come last, by id: each page
reads the valued rows by their index range, then tops up from the null ones.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Exists, Max, OuterRef, Q, Subquery, Sum

from webapp.cases import NAMES_CODEBASE
from webapp.models import Annotation, Batch, Grading, Group, GroupEvidence, RunStep
from webapp.rankings import HUMAN_REVIEW_FILTERS, Viewer, review_condition
from webapp.triage import flag_names, visible_triage

PAGE_SIZE = 50
COUNT_LIMIT = 1000  # a filtered count stops here ("1000+"): counting 100,000 matches is a scan

# sort name -> (column, descending); group_id is unique within a batch so it
# needs no tie-breaker, the others are broken by id.
SORTS = {
    "group": ("group_id", False),
    "-group": ("group_id", True),
    "pass_rate": ("pass_rate", False),
    "-pass_rate": ("pass_rate", True),
    "confidence": ("grading_confidence", False),
    "-confidence": ("grading_confidence", True),
    "agreement": ("agreement", False),
    "-agreement": ("agreement", True),
    "lines": ("lines_over_shortest", False),
    "-lines": ("lines_over_shortest", True),
}
DEFAULT_SORT = "group"
NULLABLE = {"grading_confidence", "agreement", "lines_over_shortest"}
LISTING_FIELDS = ("id", "batch_id", "group_id", "task_id", "repo", "label", "n_trajectories", "n_passed",
                  "pass_rate", "grader_top", "grader_top_flags", "any_flags", "grading_confidence", "agreement",
                  "human_disagrees", "review_state", "top_lines", "lines_over_shortest", "top_is_consensus")
TIE_SHOWN = 3  # ids of a longer top tier listed; the rest fold under "+n more" so the table keeps its width


# The triage column each triage filter and sort reads (webapp.triage.visible_triage says who sees which).
FIELD_COLUMNS = {
    "top_flag": "grader_top",
    "conf_min": "grader_confidence",
    "conf_max": "grader_confidence",
    "any_flag": "any_flags",
    "agreement": "agreement",
    "state": "review_state",
    "vs_shortest": "patch_size",
    "vs_consensus": "patch_size",
}
SORT_COLUMNS = {"confidence": "grader_confidence", "-confidence": "grader_confidence",
                "agreement": "agreement", "-agreement": "agreement", "lines": "patch_size", "-lines": "patch_size"}


def graded_condition() -> Q:
    """Groups with a finished grading."""
    return Q(Exists(Grading.objects.filter(group=OuterRef("pk"), status=Grading.Status.DONE)))


@dataclass(frozen=True)
class GroupFilter:
    label: str = ""
    pass_min: float | None = None
    pass_max: float | None = None
    graded: str = ""  # "", "yes", "no"
    review: str = ""  # "", "overridden", "reviewed", "unreviewed"
    q: str = ""
    top_flag: str = ""  # a flag on the grader's top tier
    any_flag: str = ""  # a flag anywhere in the group
    conf_min: float | None = None
    conf_max: float | None = None
    agreement: str = ""  # "", "disagrees", "agrees": a human and the grader
    state: str = ""  # "" or one of webapp.triage.REVIEW_STATES
    vs_shortest: str = ""  # "", "agrees", "differs": the grader's top tier holds a shortest patch or not
    vs_consensus: str = ""  # "", "agrees", "differs": it holds the group's consensus change or not
    evidence: str = ""  # "", "breaks": a passing candidate breaks tests the others pass (webapp/evidence)
    sort: str = DEFAULT_SORT

    def apply(self, qs):
        if self.label:
            qs = qs.filter(label=self.label)
        if self.pass_min is not None:
            qs = qs.filter(pass_rate__gte=self.pass_min)
        if self.pass_max is not None:
            qs = qs.filter(pass_rate__lte=self.pass_max)
        if self.graded:
            qs = qs.filter(graded_condition() if self.graded == "yes" else ~graded_condition())
        if self.review in HUMAN_REVIEW_FILTERS:
            qs = qs.filter(review_condition(self.review))
        if self.q:
            qs = qs.filter(Q(group_id__icontains=self.q) | Q(task_id__icontains=self.q)
                           | Q(statement__icontains=self.q))
        if self.top_flag:
            qs = qs.filter(grader_top_flags__contains=f",{self.top_flag},")
        if self.any_flag:
            qs = qs.filter(any_flags__contains=f",{self.any_flag},")
        if self.conf_min is not None:
            qs = qs.filter(grading_confidence__gte=self.conf_min)
        if self.conf_max is not None:
            qs = qs.filter(grading_confidence__lte=self.conf_max)
        if self.agreement:
            qs = qs.filter(human_disagrees=self.agreement == "disagrees")
        if self.state:
            qs = qs.filter(review_state=self.state)
        if self.vs_shortest:
            qs = qs.filter(lines_over_shortest=0) if self.vs_shortest == "agrees" else qs.filter(
                lines_over_shortest__gt=0)
        if self.vs_consensus:
            qs = qs.filter(top_is_consensus=self.vs_consensus == "agrees")
        if self.evidence == "breaks":
            qs = qs.filter(evidence__breaks_tests=True)
        return qs

    def within(self, columns: frozenset[str]) -> GroupFilter:
        """This filter without what reads a triage column not in `columns`: filtering or
        sorting by hidden data would reveal it."""
        cleared = {name: GroupFilter.__dataclass_fields__[name].default
                   for name, column in FIELD_COLUMNS.items() if column not in columns}
        if SORT_COLUMNS.get(self.sort, "") not in columns | {""}:
            cleared["sort"] = DEFAULT_SORT
        return replace(self, **cleared)

    @property
    def is_filtered(self) -> bool:
        return bool(self.label or self.pass_min is not None or self.pass_max is not None
                    or self.graded or self.review or self.q or self.top_flag or self.any_flag
                    or self.conf_min is not None or self.conf_max is not None or self.agreement or self.state
                    or self.vs_shortest or self.vs_consensus or self.evidence)

    def params(self) -> dict[str, str]:
        """The non-default values, as query parameters."""
        out = {}
        for name in ("label", "graded", "review", "q", "top_flag", "any_flag", "agreement", "state", "vs_shortest",
                     "vs_consensus", "evidence"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        for name in ("pass_min", "pass_max"):
            if getattr(self, name) is not None:
                out[name] = f"{100 * getattr(self, name):g}"  # in percent, as the form takes it
        for name in ("conf_min", "conf_max"):
            if getattr(self, name) is not None:
                out[name] = f"{getattr(self, name):g}"
        if self.sort != DEFAULT_SORT:
            out["sort"] = self.sort
        return out


def encode_cursor(value, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode().rstrip("=")


# what a cursor's sort value is, per sort column
CURSOR_VALUE_TYPES = {"group_id": str, "pass_rate": int | float, "grading_confidence": int | float,
                      "agreement": int | float, "lines_over_shortest": int}
ID_MAX = 2**63 - 1


def decode_cursor(token: str, column: str):
    """(value, pk) or None for anything malformed: a value that is not of the sort
    column's type (or null, for a nullable one) or not finite, an id out of the id column's range."""
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        return None
    if value is None and column not in NULLABLE:
        return None
    if value is not None and (isinstance(value, bool) or not isinstance(value, CURSOR_VALUE_TYPES[column])):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(pk, bool) or not isinstance(pk, int) or not 0 < pk <= ID_MAX:
        return None
    return value, pk


def _after(qs, column: str, descending: bool, value, pk: int, unique: bool):
    """Rows strictly after (value, pk) in the order (column, id), descending or not."""
    op = "lt" if descending else "gt"
    if unique:
        return qs.filter(**{f"{column}__{op}": value})
    # col >= v (a range the index can seek to) and then the tie broken by id
    bound = "lte" if descending else "gte"
    return qs.filter(**{f"{column}__{bound}": value}).filter(
        Q(**{f"{column}__{op}": value}) | Q(**{f"id__{op}": pk})
    )


def _ordered(qs, column: str, descending: bool, reverse: bool = False):
    prefix = "-" if descending != reverse else ""
    if column in ("group_id", "id"):  # unique (group_id in a batch): the index gives the order as it is
        return qs.order_by(f"{prefix}{column}")
    return qs.order_by(f"{prefix}{column}", f"{prefix}id")


def _segments(qs, column: str):
    """The listing in two parts: rows with a value of `column`, then (nullable columns) rows without."""
    if column not in NULLABLE:
        return qs, None
    return qs.filter(**{f"{column}__isnull": False}), qs.filter(**{f"{column}__isnull": True})


def _forward(qs, column: str, descending: bool, cursor, limit: int) -> list:
    """Up to `limit` rows after `cursor` ((value, pk); None: from the start), in the listing's order."""
    valued, nulls = _segments(qs, column)
    if cursor is not None and cursor[0] is None:  # within the nulls, ordered by id
        return list(_ordered(_after(nulls, "id", descending, cursor[1], cursor[1], True), "id", descending)[:limit])
    if cursor is not None:
        valued = _after(valued, column, descending, *cursor, column == "group_id")
    rows = list(_ordered(valued, column, descending)[:limit])
    if nulls is not None and len(rows) < limit:
        rows += list(_ordered(nulls, "id", descending)[:limit - len(rows)])
    return rows


def _backward(qs, column: str, descending: bool, cursor, limit: int) -> list:
    """Up to `limit` rows before `cursor` ((value, pk)), nearest first."""
    valued, nulls = _segments(qs, column)
    value, pk = cursor
    rows = []
    if value is None:
        rows = list(_ordered(_after(nulls, "id", not descending, pk, pk, True), "id", descending,
                             reverse=True)[:limit])
        if len(rows) == limit:
            return rows
    else:
        valued = _after(valued, column, not descending, value, pk, column == "group_id")
    return rows + list(_ordered(valued, column, descending, reverse=True)[:limit - len(rows)])


@dataclass
class GroupPage:
    groups: list
    columns: frozenset[str]  # the triage columns the viewer may see (webapp.triage.visible_triage)
    total: int
    total_is_lower_bound: bool = False
    next_cursor: str | None = None
    prev_cursor: str | None = None
    label_counts: dict = field(default_factory=dict)


def group_page(batch: Batch, flt: GroupFilter, *, viewer: Viewer, after: str = "", before: str = "",
               size: int = PAGE_SIZE) -> GroupPage:
    """One page of `batch`'s groups under `flt`, as `viewer` may see them: the triage columns
    hidden from them neither filter, sort nor show (`GroupPage.columns`)."""
    triage = visible_triage(batch, viewer=viewer)
    flt = flt.within(triage.columns)
    column, descending = SORTS.get(flt.sort, SORTS[DEFAULT_SORT])
    base = flt.apply(Group.objects.filter(batch=batch))
    qs = base.only(*LISTING_FIELDS)
    cursor = decode_cursor(before or after, column) if (before or after) else None
    if cursor and before:
        rows = _backward(qs, column, descending, cursor, size + 1)
        has_prev, has_next = len(rows) > size, True
        rows = rows[:size][::-1]
    else:
        rows = _forward(qs, column, descending, cursor, size + 1)
        has_prev, has_next = cursor is not None, len(rows) > size
        rows = rows[:size]
    rows = triage.rows(rows)
    for g in rows:
        g.top_flag_names = flag_names(g.grader_top_flags)
        # the top pick's flags show beside it: this column lists the others
        g.other_flag_names = [name for name in flag_names(g.any_flags) if name not in g.top_flag_names]
        top = g.grader_top or []
        g.top_shown, g.top_more = (top, []) if len(top) <= TIE_SHOWN + 1 else (top[:TIE_SHOWN], top[TIE_SHOWN:])
        g.shortest_lines = None if None in (g.top_lines, g.lines_over_shortest) else g.top_lines - g.lines_over_shortest
    if flt.is_filtered:
        total = base.order_by()[:COUNT_LIMIT + 1].count()
        page = GroupPage(groups=rows, columns=triage.columns, total=min(total, COUNT_LIMIT),
                         total_is_lower_bound=total > COUNT_LIMIT)
    else:
        page = GroupPage(groups=rows, columns=triage.columns, total=batch.n_groups)
    if rows and has_next:
        page.next_cursor = encode_cursor(getattr(rows[-1], column), rows[-1].pk)
    if rows and has_prev:
        page.prev_cursor = encode_cursor(getattr(rows[0], column), rows[0].pk)
    return page


def neighbours(group: Group, flt: GroupFilter, *, viewer: Viewer) -> tuple[int | None, int | None]:
    """Primary keys of the groups before and after `group` in the batch under `flt`, as
    `viewer` may filter and sort it (`group_page`)."""
    flt = flt.within(visible_triage(group.batch, viewer=viewer).columns)
    column, descending = SORTS.get(flt.sort, SORTS[DEFAULT_SORT])
    base = flt.apply(Group.objects.filter(batch_id=group.batch_id)).only("id", column)
    cursor = (getattr(group, column), group.pk)
    prev = _backward(base, column, descending, cursor, 1)
    nxt = _forward(base, column, descending, cursor, 1)
    return (prev[0].pk if prev else None, nxt[0].pk if nxt else None)


def label_counts(batches) -> dict[int, dict[str, int]]:
    """Groups per label for each batch. A batch's labels change only when an
    import adds groups, so the counts are cached under its group count."""
    keys = {b.pk: f"gagar:labels:{b.pk}:{b.created_at.timestamp()}:{b.n_groups}:{b.n_trajectories}"
            for b in batches}
    cached = cache.get_many(list(keys.values())) if keys else {}
    out = {pk: cached[key] for pk, key in keys.items() if key in cached}
    missing = [pk for pk in keys if pk not in out]
    if missing:
        fresh: dict[int, dict[str, int]] = {pk: {} for pk in missing}
        rows = (Group.objects.filter(batch_id__in=missing).order_by()
                .values_list("batch_id", "label").annotate(n=Count("id")))
        for batch_id, label, n in rows:
            fresh[batch_id][label] = n
        cache.set_many({keys[pk]: counts for pk, counts in fresh.items()}, timeout=24 * 3600)
        out.update(fresh)
    return out


def graded_counts(batch_ids) -> dict[int, int]:
    """Groups with a finished grading, per batch."""
    rows = (Grading.objects.filter(group__batch_id__in=list(batch_ids), status=Grading.Status.DONE).order_by()
            .values_list("group__batch_id").annotate(n=Count("group_id", distinct=True)))
    return dict(rows)


@dataclass(frozen=True)
class FoldedRun:
    """A training run's steps as one row of the batches page."""

    pk: int
    name: str
    steps: int
    latest: int
    latest_batch_id: int
    n_groups: int
    n_trajectories: int
    n_passed: int
    grading: bool  # a grading of one of its steps is queued or running
    created_at: object

    @property
    def pass_rate(self) -> float:
        return self.n_passed / self.n_trajectories if self.n_trajectories else 0.0


def folded_runs() -> list[FoldedRun]:
    """Every run with its steps' totals, its latest step and whether a step is being graded."""
    totals = (RunStep.objects.order_by().values("run_id", "run__name").annotate(
        steps=Count("pk"), latest=Max("number"), n_groups=Sum("batch__n_groups"),
        n_trajectories=Sum("batch__n_trajectories"), n_passed=Sum("batch__n_passed"), created_at=Max("created_at")))
    latest_batch = dict(RunStep.objects.filter(number=Subquery(
        RunStep.objects.filter(run=OuterRef("run")).order_by("-number").values("number")[:1])).values_list(
        "run_id", "batch_id"))
    grading = set(Grading.objects.filter(run__batch__run_step__isnull=False, status__in=(
        Grading.Status.QUEUED, Grading.Status.RUNNING)).values_list("run__batch__run_step__run_id", flat=True))
    return [FoldedRun(pk=row["run_id"], name=row["run__name"], steps=row["steps"], latest=row["latest"],
                      latest_batch_id=latest_batch[row["run_id"]], n_groups=row["n_groups"] or 0,
                      n_trajectories=row["n_trajectories"] or 0, n_passed=row["n_passed"] or 0,
                      grading=row["run_id"] in grading, created_at=row["created_at"]) for row in totals]


def batches_overview():
    """The batches outside runs, each run folded into one row (`FoldedRun`), newest first."""
    batches = list(Batch.objects.filter(run_step__isnull=True).select_related("created_by")
                   .defer("sources", "advantage_config"))
    ids = [b.pk for b in batches]
    labels = label_counts(batches)
    graded = graded_counts(ids)
    progress = annotation_progress(ids)
    for b in batches:
        b.review = progress[b.pk]
        b.label_counts = [(value, name, labels.get(b.pk, {}).get(value, 0)) for value, name in Group.Label.choices]
        b.n_mixed = labels.get(b.pk, {}).get(Group.Label.MIXED, 0)
        b.graded = graded.get(b.pk, 0)
    return sorted([*batches, *folded_runs()], key=lambda row: row.created_at, reverse=True)


def annotation_progress(batch_ids) -> dict[int, dict]:
    """Per batch: mixed groups that some human ranked, and groups ranked per annotator."""
    ids = list(batch_ids)
    out = {pk: {"reviewed": 0, "by_user": []} for pk in ids}
    rankings = Annotation.objects.filter(group__batch_id__in=ids, kind=Annotation.Kind.RANKING).order_by()
    reviewed = (rankings.filter(group__label=Group.Label.MIXED).values_list("group__batch_id")
                .annotate(n=Count("group_id", distinct=True)))
    for batch_id, n in reviewed:
        out[batch_id]["reviewed"] = n
    per_user = (rankings.values_list("group__batch_id", "user__username")
                .annotate(n=Count("group_id", distinct=True)).order_by("group__batch_id", "-n", "user__username"))
    for batch_id, username, n in per_user:
        out[batch_id]["by_user"].append((username, n))
    return out


def evidence_absent(batch: Batch) -> list[tuple[str, int]]:
    """Why groups of `batch` have no execution evidence, said once for the batch: (reason, how
    many groups), most first. Each group's page says it again in one quiet line."""
    if not settings.GAGAR_CODEBASES:
        return [("execution evidence is off on this instance (no GAGAR_CODEBASES)", batch.n_groups)]
    rows = (GroupEvidence.objects.filter(group__batch=batch, status=GroupEvidence.Status.NONE)
            .values("reason").annotate(n=Count("pk")).order_by("-n", "reason"))
    failed = GroupEvidence.objects.filter(group__batch=batch, status=GroupEvidence.Status.FAILED).count()
    unnamed = Group.objects.filter(batch=batch).exclude(NAMES_CODEBASE).count()
    reasons = [(row["reason"], row["n"]) for row in rows]
    return sorted(reasons + [(why, n) for why, n in (
        ("the evidence pass failed (each group's page says why)", failed),
        ("the task names no codebase (task.repo and task.base_commit, or task.snapshot)", unnamed)) if n],
        key=lambda item: (-item[1], item[0]))
