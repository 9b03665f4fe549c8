"""Writing the search index: one entry per task statement, per trajectory's patch and
per transcript turn, each with the text it is found by.

A worker writes the entries after each import commits (`batch_index`), not the import
itself: a trigram index costs time per character indexed, which made PostgreSQL imports
four times slower. So the index of a batch may be incomplete for a while; its
SearchState row says how far it got, and the search page says so. The import sends the
message once it commits (webapp/derived.py, `search_stale`); the derived data's sweep
(`derived.sweep_derived(derived.SEARCH_INDEX)`) sends it again for a batch whose index is incomplete
and that nothing moved for a while (the broker was down, lost the message, or the worker
died). A worker indexes the trajectories past
the state's `indexed_through`, CHUNK_TRAJECTORIES at a time, committing the entries and
the state together: a second message or a killed worker never indexes a row twice, and
an append indexes only what it added.

A deleted batch's entries go with it (a trigger, webapp/migrations/0010_search_index.py).
PostgreSQL keeps them in a table with a trigram GIN index, SQLite in an FTS5 table with
the trigram tokenizer.
"""

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import NamedTuple

from django.db import connection, transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from webapp.html.transcripts import message_parts
from webapp.models import Batch, Group, SearchState, Trajectory

TABLE = "webapp_search_entry"
COLUMNS = ("batch_id", "group_pk", "trajectory_pk", "kind", "turn", "role", "text")
CHUNK = 2000  # entries written at a time
CHUNK_TRAJECTORIES = 200  # trajectories indexed, and committed, at a time by the worker

STATEMENT, PATCH, TURN = "statement", "patch", "turn"
KINDS = (STATEMENT, PATCH, TURN)


class Entry(NamedTuple):  # a tuple as written: dataclasses.astuple deep-copies, a third of the worker's time
    batch_id: int
    group_pk: int
    trajectory_pk: int | None
    kind: str
    turn: int | None
    role: str
    text: str


def statement_entry(batch_id: int, group_pk: int, statement: str) -> Entry:
    return Entry(batch_id, group_pk, None, STATEMENT, None, "", statement)


def turn_text(message) -> tuple[str, str]:
    """(role, text) of a transcript message: what the transcript view shows of it, each
    tool call's name above its arguments."""
    role = message.get("role") if isinstance(message, dict) else None
    texts = [f"{title}\n{text}" if title and kind == "call" else text for kind, title, text in message_parts(message)]
    return (role if isinstance(role, str) else ""), "\n".join(t for t in texts if t)


def trajectory_entries(batch_id: int, group_pk: int, trajectory_pk: int, patch: str, messages) -> Iterator[Entry]:
    """The entries of one trajectory: its patch, then each turn of its transcript."""
    if patch:
        yield Entry(batch_id, group_pk, trajectory_pk, PATCH, None, "", patch)
    if messages is None:
        return
    for index, message in enumerate(messages if isinstance(messages, list) else [messages]):
        role, text = turn_text(message)
        if text:
            yield Entry(batch_id, group_pk, trajectory_pk, TURN, index, role, text)


def insert_entries(entries: Iterable[Entry]) -> None:
    """Write `entries`, CHUNK at a time (so a caller may stream them from a query)."""
    entries = iter(entries)
    while chunk := list(islice(entries, CHUNK)):
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY {TABLE} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                    for entry in chunk:
                        copy.write_row(entry)
            else:
                marks = ", ".join(["%s"] * len(COLUMNS))
                cursor.executemany(f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({marks})",
                                   chunk)


# --- the worker's side --------------------------------------------------------------

def batch_index(batch_id: int) -> int:
    """In a worker: index the batch's trajectories that are not indexed yet, with the
    statements of their groups, a chunk per transaction. Returns how many trajectories
    it indexed; a second run indexes none."""
    indexed = 0
    while True:
        with transaction.atomic():
            # The lock makes a second worker on the same batch wait, then go on from here.
            state = SearchState.objects.select_for_update().filter(batch_id=batch_id).first()
            if state is None:
                return indexed  # the batch was deleted
            rows = list(Trajectory.objects.filter(batch_id=batch_id, pk__gt=state.indexed_through).order_by("pk")
                        .values_list("pk", "group_id", "patch", "transcript__messages")[:CHUNK_TRAJECTORIES])
            if not rows:
                return indexed
            insert_entries(_chunk_entries(batch_id, state.indexed_through, rows))
            state.indexed_through = rows[-1][0]
            state.n_indexed += len(rows)
            state.indexed_at = timezone.now()
            state.save(update_fields=["indexed_through", "n_indexed", "indexed_at"])
        indexed += len(rows)


def _chunk_entries(batch_id: int, indexed_through: int, rows: list) -> Iterator[Entry]:
    """The entries of a chunk of trajectories, each group's statement before its first
    trajectory. A group's trajectories all come with one import (an append adds groups,
    never trajectories to a group), so its statement is new here exactly when none of
    its trajectories was indexed before this chunk."""
    earlier = Trajectory.objects.filter(group_id=OuterRef("pk"), pk__lte=indexed_through)
    statements = dict(Group.objects.filter(pk__in={group_pk for _, group_pk, _, _ in rows}).exclude(statement="")
                      .exclude(Exists(earlier)).values_list("pk", "statement"))
    for trajectory_pk, group_pk, patch, messages in rows:
        statement = statements.pop(group_pk, None)
        if statement is not None:
            yield statement_entry(batch_id, group_pk, statement)
        yield from trajectory_entries(batch_id, group_pk, trajectory_pk, patch, messages)


def index_delete(*, batch_id: int) -> int:
    """Empty the batch's index and mark it complete, so that nothing indexes the batch again (a
    run's pruned step: its transcripts are gone); how many entries were deleted."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE batch_id = %s", [batch_id])
        deleted = max(cursor.rowcount, 0)
    batch = Batch.objects.get(pk=batch_id)
    top = Trajectory.objects.filter(batch_id=batch_id).aggregate(top=Max("pk"))["top"] or 0
    SearchState.objects.update_or_create(batch_id=batch_id, defaults={
        "indexed_through": top, "n_indexed": batch.n_trajectories})
    return deleted
