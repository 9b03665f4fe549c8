"""Reads of the review pages: a group with what the page needs, its trajectories and
patches, and transcripts sliced by the database."""

from __future__ import annotations

import json
from typing import NamedTuple

from django.db import connection
from django.db.models.functions import Length
from django.shortcuts import get_object_or_404

from webapp.models import Group, Trajectory, Transcript


def trajectory_or_404(pk) -> Trajectory:
    """A trajectory with its group and batch, without its patch text."""
    return get_object_or_404(Trajectory.objects.select_related("group", "batch").defer("patch"), pk=pk)


def group_trajectories(group: Group, pks=None):
    """A group's trajectories without their patch text (the page takes it from the cache);
    only those of `pks` when given."""
    found = Trajectory.objects.filter(group=group)
    if pks is not None:
        found = found.filter(pk__in=list(pks))
    return list(found.defer("patch").order_by("id"))


class Member(NamedTuple):
    """A trajectory as a paged group's page needs every one of them: no patch, no metrics."""

    pk: int
    trajectory_id: str
    passed: bool
    reward: float

    @property
    def tid(self) -> str:
        return self.trajectory_id


def group_members(group: Group) -> list[Member]:
    """Every trajectory of `group`, lean, in pk order (tens of thousands: one tuple each)."""
    return list(map(Member._make, Trajectory.objects.filter(group=group).order_by("id")
                    .values_list("pk", "trajectory_id", "passed", "reward")))


def trajectory_facts(pks) -> dict[int, tuple[dict, int]]:
    """(metrics, patch length in characters) of the trajectories of `pks`."""
    return {pk: (metrics, chars) for pk, metrics, chars in Trajectory.objects.filter(pk__in=list(pks))
            .values_list("pk", "metrics", Length("patch"))}


def patches(pks) -> dict[int, str]:
    return dict(Trajectory.objects.filter(pk__in=list(pks)).values_list("pk", "patch"))


def patch(pk: int) -> str | None:
    """One trajectory's patch; None if there is no such trajectory (an id past the
    id column's range included: the exact lookup knows that, `__in` does not)."""
    return Trajectory.objects.filter(pk=pk).values_list("patch", flat=True).first()


TURN_INDEX_MAX = 2**31 - 1  # the largest PostgreSQL jsonpath subscript

_SQLITE_ITEM = ("CASE type WHEN 'true' THEN json('true') WHEN 'false' THEN json('false') "
                "WHEN 'object' THEN json(value) WHEN 'array' THEN json(value) ELSE value END")


def transcript_slice(trajectory_pk: int, start: int, stop: int) -> tuple[int, list] | None:
    """(number of messages, messages[start:stop]) of a transcript, or None if
    there is none. The database cuts the slice, so a 20 MB transcript is not
    sent over and decoded for a page of it."""
    table = connection.ops.quote_name(Transcript._meta.db_table)
    # the turn numbers come from URLs: bounded to what SQLite integers and PostgreSQL jsonpath subscripts take
    start, stop = (min(max(0, n), TURN_INDEX_MAX) for n in (start, stop))
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


def with_transcripts(pks) -> set[int]:
    """Those of the trajectories `pks` that have a transcript."""
    return set(Transcript.objects.filter(pk__in=list(pks)).values_list("pk", flat=True))


def transcript_messages(trajectory_pk: int):
    """The whole transcript (for a search), or None."""
    return Transcript.objects.filter(pk=trajectory_pk).values_list("messages", flat=True).first()
