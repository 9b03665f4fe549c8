"""Read-side queries for the review pages.

Listing a batch's groups uses keyset pagination over an indexed sort key
((batch, group_id) is unique; (batch, pass_rate, id) and (batch, label, id)
are indexed), so page 2,000 of 100,000 groups costs what page 1 does.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from django.apps import apps
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Exists, JSONField, OuterRef, Q, Subquery
from django.shortcuts import get_object_or_404
from django.utils import timezone

from webapp.models import Annotation, Batch, Group, Lease, Trajectory, Transcript

PAGE_SIZE = 50
COUNT_LIMIT = 1000  # a filtered count stops here ("1000+"): counting 100,000 matches is a scan

# sort name -> (column, descending); group_id is unique within a batch so it
# needs no tie-breaker, the others are broken by id.
SORTS = {
    "group": ("group_id", False),
    "-group": ("group_id", True),
    "pass_rate": ("pass_rate", False),
    "-pass_rate": ("pass_rate", True),
}
DEFAULT_SORT = "group"
LISTING_FIELDS = ("id", "batch_id", "group_id", "task_id", "repo", "label", "n_trajectories", "n_passed",
                  "pass_rate")


def grading_model():
    """The Grading model once the grading app defines it (issue 4), else None."""
    try:
        model = apps.get_model("webapp", "Grading")
    except LookupError:
        return None
    names = {f.name for f in model._meta.get_fields()}
    return model if {"group", "status"} <= names else None


def graded_condition():
    """A Q for groups with a finished grade, or None while grading does not exist."""
    model = grading_model()
    if model is None:
        return None
    return Q(Exists(model.objects.filter(group=OuterRef("pk"), status="done")))


REVIEW_STATES = {
    "overridden": "overridden: final ranking is human",
    "reviewed": "ranked by a human",
    "unreviewed": "not ranked by a human",
}


def review_condition(state: str) -> Q:
    """Groups whose final ranking is a human one ("overridden"), or that some human ranked or not."""
    if state == "overridden":
        later = Annotation.objects.filter(group=OuterRef("group"), independent=False, version__gt=OuterRef("version"))
        return Q(Exists(Annotation.objects.filter(group=OuterRef("pk"), independent=False, tiers__isnull=False)
                        .exclude(Exists(later))))
    ranked = Q(Exists(Annotation.objects.filter(group=OuterRef("pk"), kind=Annotation.Kind.RANKING)))
    return ranked if state == "reviewed" else ~ranked


@dataclass(frozen=True)
class GroupFilter:
    label: str = ""
    pass_min: float | None = None
    pass_max: float | None = None
    graded: str = ""  # "", "yes", "no"
    review: str = ""  # "", "overridden", "reviewed", "unreviewed"
    q: str = ""
    sort: str = DEFAULT_SORT

    def apply(self, qs):
        if self.label:
            qs = qs.filter(label=self.label)
        if self.pass_min is not None:
            qs = qs.filter(pass_rate__gte=self.pass_min)
        if self.pass_max is not None:
            qs = qs.filter(pass_rate__lte=self.pass_max)
        if self.graded:
            condition = graded_condition()
            if condition is not None:
                qs = qs.filter(condition if self.graded == "yes" else ~condition)
        if self.review in REVIEW_STATES:
            qs = qs.filter(review_condition(self.review))
        if self.q:
            qs = qs.filter(Q(group_id__icontains=self.q) | Q(task_id__icontains=self.q)
                           | Q(statement__icontains=self.q))
        return qs

    @property
    def is_filtered(self) -> bool:
        return bool(self.label or self.pass_min is not None or self.pass_max is not None
                    or self.graded or self.review or self.q)

    def params(self) -> dict[str, str]:
        """The non-default values, as query parameters."""
        out = {}
        for name in ("label", "graded", "review", "q"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        for name in ("pass_min", "pass_max"):
            if getattr(self, name) is not None:
                out[name] = f"{getattr(self, name):g}"
        if self.sort != DEFAULT_SORT:
            out["sort"] = self.sort
        return out


def encode_cursor(value, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode().rstrip("=")


def decode_cursor(token: str):
    """(value, pk) or None for anything malformed."""
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        return None
    if not isinstance(pk, int) or not isinstance(value, str | int | float) or isinstance(value, bool):
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
    if column == "group_id":  # unique in a batch: the (batch, group_id) index gives the order as it is
        return qs.order_by(f"{prefix}{column}")
    return qs.order_by(f"{prefix}{column}", f"{prefix}id")


@dataclass
class GroupPage:
    groups: list
    total: int
    total_is_lower_bound: bool = False
    next_cursor: str | None = None
    prev_cursor: str | None = None
    label_counts: dict = field(default_factory=dict)


def group_page(batch: Batch, flt: GroupFilter, *, after: str = "", before: str = "",
               size: int = PAGE_SIZE) -> GroupPage:
    column, descending = SORTS.get(flt.sort, SORTS[DEFAULT_SORT])
    unique = column == "group_id"
    base = flt.apply(Group.objects.filter(batch=batch))
    qs = base.only(*LISTING_FIELDS)
    cursor = decode_cursor(before or after) if (before or after) else None
    if cursor and before:
        rows = list(_ordered(_after(qs, column, not descending, *cursor, unique), column, descending,
                             reverse=True)[:size + 1])
        has_prev, has_next = len(rows) > size, True
        rows = rows[:size][::-1]
    else:
        if cursor:
            qs = _after(qs, column, descending, *cursor, unique)
        rows = list(_ordered(qs, column, descending)[:size + 1])
        has_prev, has_next = cursor is not None, len(rows) > size
        rows = rows[:size]
    if flt.is_filtered:
        total = base.order_by()[:COUNT_LIMIT + 1].count()
        page = GroupPage(groups=rows, total=min(total, COUNT_LIMIT), total_is_lower_bound=total > COUNT_LIMIT)
    else:
        page = GroupPage(groups=rows, total=batch.n_groups)
    if rows and has_next:
        page.next_cursor = encode_cursor(getattr(rows[-1], column), rows[-1].pk)
    if rows and has_prev:
        page.prev_cursor = encode_cursor(getattr(rows[0], column), rows[0].pk)
    return page


def neighbours(group: Group, flt: GroupFilter) -> tuple[int | None, int | None]:
    """Primary keys of the groups before and after `group` in the batch under `flt`."""
    column, descending = SORTS.get(flt.sort, SORTS[DEFAULT_SORT])
    unique = column == "group_id"
    base = flt.apply(Group.objects.filter(batch_id=group.batch_id))
    value = getattr(group, column)
    nxt = _ordered(_after(base, column, descending, value, group.pk, unique), column, descending)
    prev = _ordered(_after(base, column, not descending, value, group.pk, unique), column, descending,
                    reverse=True)
    return (prev.values_list("pk", flat=True).first(), nxt.values_list("pk", flat=True).first())


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


def graded_counts(batch_ids) -> dict[int, int] | None:
    """Groups with a finished grade per batch, or None while grading does not exist."""
    model = grading_model()
    if model is None:
        return None
    rows = (model.objects.filter(group__batch_id__in=list(batch_ids), status="done").order_by()
            .values_list("group__batch_id").annotate(n=Count("group_id", distinct=True)))
    return dict(rows)


def batches_overview():
    batches = list(Batch.objects.select_related("created_by").defer("sources", "advantage_config"))
    ids = [b.pk for b in batches]
    labels = label_counts(batches)
    graded = graded_counts(ids)
    progress = annotation_progress(ids)
    for b in batches:
        b.review = progress[b.pk]
        b.label_counts = [(value, name, labels.get(b.pk, {}).get(value, 0)) for value, name in Group.Label.choices]
        b.n_mixed = labels.get(b.pk, {}).get(Group.Label.MIXED, 0)
        b.graded = None if graded is None else graded.get(b.pk, 0)
    return batches


def group_trajectories(group: Group):
    """A group's trajectories without their patch text (the page takes it from the cache)."""
    return list(Trajectory.objects.filter(group=group).defer("patch").order_by("id"))


def patches(pks) -> dict[int, str]:
    return dict(Trajectory.objects.filter(pk__in=list(pks)).values_list("pk", "patch"))


_SQLITE_ITEM = ("CASE type WHEN 'true' THEN json('true') WHEN 'false' THEN json('false') "
                "WHEN 'object' THEN json(value) WHEN 'array' THEN json(value) ELSE value END")


def transcript_slice(trajectory_pk: int, start: int, stop: int) -> tuple[int, list] | None:
    """(number of messages, messages[start:stop]) of a transcript, or None if
    there is none. The database cuts the slice, so a 20 MB transcript is not
    sent over and decoded for a page of it."""
    table = connection.ops.quote_name(Transcript._meta.db_table)
    start, stop = max(0, start), max(0, stop)
    if connection.vendor == "postgresql":
        sql = (f"SELECT CASE jsonb_typeof(messages) WHEN 'array' THEN jsonb_array_length(messages) ELSE 0 END, "
               f"CASE jsonb_typeof(messages) WHEN 'array' THEN jsonb_path_query_array(messages, "
               f"CAST(%s AS jsonpath)) ELSE '[]'::jsonb END::text FROM {table} WHERE trajectory_id = %s")
        params = [f"$[{start} to {max(start, stop - 1)}]", trajectory_pk]
    elif connection.vendor == "sqlite":
        sql = (f"SELECT json_array_length(messages), (SELECT json_group_array({_SQLITE_ITEM}) "
               f"FROM json_each({table}.messages) WHERE key >= %s AND key < %s) FROM {table} WHERE trajectory_id = %s")
        params = [start, stop, trajectory_pk]
    else:
        messages = Transcript.objects.filter(pk=trajectory_pk).values_list("messages", flat=True).first()
        if messages is None:
            return None
        messages = messages if isinstance(messages, list) else []
        return len(messages), messages[start:stop]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    return row[0] or 0, json.loads(row[1] or "[]")[:stop - start]


def transcript_lengths(pks) -> dict[int, int]:
    """Messages per transcript, counted by the database (0 for a non-list)."""
    pks = [int(pk) for pk in pks]
    if not pks:
        return {}
    table = connection.ops.quote_name(Transcript._meta.db_table)
    marks = ", ".join(["%s"] * len(pks))
    if connection.vendor == "postgresql":
        length = "CASE jsonb_typeof(messages) WHEN 'array' THEN jsonb_array_length(messages) ELSE 0 END"
    elif connection.vendor == "sqlite":
        length = "json_array_length(messages)"
    else:
        return {pk: len(m) if isinstance(m, list) else 0 for pk, m in
                Transcript.objects.filter(pk__in=pks).values_list("pk", "messages")}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT trajectory_id, {length} FROM {table} WHERE trajectory_id IN ({marks})", pks)
        return {pk: n or 0 for pk, n in cursor.fetchall()}


def transcript_messages(trajectory_pk: int):
    """The whole transcript (for a search), or None."""
    return Transcript.objects.filter(pk=trajectory_pk).values_list("messages", flat=True).first()


def group_for_page(pk: int, user) -> Group:
    """A group with its batch and annotation policy, and, in the same query, who holds a
    lease on it and the latest ranking `user` made of it (my_version, my_tiers)."""
    now = timezone.now()
    live = Lease.objects.filter(group=OuterRef("pk"), completed_at=None, expires_at__gt=now)
    others = live.exclude(user=user).order_by("expires_at")
    mine = Annotation.objects.filter(group=OuterRef("pk"), user=user, kind=Annotation.Kind.RANKING).order_by("-version")
    return get_object_or_404(
        Group.objects.select_related("batch", "batch__annotation_policy").annotate(
            my_lease_until=Subquery(live.filter(user=user).values("expires_at")[:1]),
            held_by=Subquery(others.values("user__username")[:1]),
            held_until=Subquery(others.values("expires_at")[:1]),
            my_version=Subquery(mine.values("version")[:1]),
            my_tiers=Subquery(mine.values("tiers")[:1], output_field=JSONField()),
        ),
        pk=pk,
    )


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
