"""Reads of the search page: a batch's entries whose text holds the query, a page at a time.

A query is a case-insensitive substring of at least MIN_CHARS characters (the
trigram indexes cannot narrow a shorter one), the same rule on PostgreSQL (ILIKE
over a pg_trgm index) and SQLite (an FTS5 trigram phrase). Hits come in entry
order (import order), pages keyed by the last entry id. The database first finds
the hits after that id in any order, stopping at COUNT_LIMIT + 1 (the count goes
that far only), so neither a rare nor a common word makes it collect every hit
(`_page_rows`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlencode

from django.db import connection
from django.urls import reverse

from webapp.html.patches import hunk_anchor
from webapp.models import Batch, Group, SearchState, Trajectory
from webapp.search import snippets
from webapp.search.services import KINDS, PATCH, STATEMENT, TABLE, TURN

PAGE_SIZE = 20
COUNT_LIMIT = 1000
MIN_CHARS = 3
MAX_CHARS = 200
ENTRY_COLUMNS = "group_pk, trajectory_pk, kind, turn, role, text"


@dataclass
class Hit:
    entry_id: int
    kind: str
    group_pk: int
    group_id: str
    trajectory_pk: int | None
    trajectory_id: str
    turn: int | None
    role: str
    snippet: str  # safe HTML: escaped text, matches in <mark>
    matches: int  # occurrences of the query in this entry
    url: str  # the group page, at the hunk or turn
    place: snippets.PatchPlace | None = None  # a patch hit's file and hunk
    detail_url: str = ""  # the hunk in the file page, or the turn in the transcript page


@dataclass
class HitPage:
    hits: list[Hit]
    total: int  # hits after the page's `after`, counted up to COUNT_LIMIT
    total_is_lower_bound: bool
    next_after: int | None


@dataclass
class IndexProgress:
    """How many of a batch's trajectories the search index holds: a worker fills it after
    each import (webapp.search.services.batch_index)."""

    indexed: int
    total: int

    @property
    def complete(self) -> bool:
        return self.indexed >= self.total

    @property
    def counts(self) -> str:
        return f"{self.indexed:,} of {self.total:,} trajectories"


def index_progress(batch: Batch) -> IndexProgress:
    """The index's progress on `batch`; nothing is indexed before its state exists (the import
    makes it)."""
    indexed = SearchState.objects.filter(batch=batch).values_list("n_indexed", flat=True).first()
    return IndexProgress(indexed=indexed or 0, total=batch.n_trajectories)


def _key() -> str:
    return "id" if connection.vendor == "postgresql" else "rowid"


def _index_pattern(query: str, pattern: str) -> str:
    """What the trigram index is asked for: the query's words (pg_trgm's: runs of letters and
    digits) in order, any text between them, where one has 3 characters; else `pattern`.

    Every text holding the query matches it, and the query's own test follows on each entry
    the index finds. It leaves out the trigrams pg_trgm makes of a word's edges next to "_",
    "." or "/" ("  p", " pa", "th " for ".path."), the commonest in code: reading their lists
    took half of the index scan of `os.path.join` and `get_prep_value` (docs/performance.md)."""
    words = re.findall(r"[^\W_]+", query)
    if not any(len(word) >= 3 for word in words):
        return pattern
    return "%" + "%".join(words) + "%"


def _conditions(batch: Batch, query: str, kind: str, in_id_order: bool = False) -> tuple[str, list]:
    """The WHERE clause (and its parameters) of entries of `batch` holding `query`.
    `in_id_order`: read a range of entries in id order and test each, rather than
    collect every hit of the whole batch from the index and sort them."""
    if connection.vendor == "postgresql":
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        index_pattern = _index_pattern(query, pattern)
        where, params = ["batch_id = %s"], [batch.pk]
        if in_id_order or index_pattern != pattern:
            # "IS TRUE" keeps the condition out of the trigram index (PostgreSQL cannot use
            # it for that form): the entries are read in id order, or the index is asked
            # for index_pattern alone.
            where.append("(text ILIKE %s) IS TRUE")
            params.append(pattern)
        if not in_id_order:
            where.append("text ILIKE %s")
            params.append(index_pattern)
    else:
        where, params = [f"{TABLE} MATCH %s", "batch_id = %s"], ['"' + query.replace('"', '""') + '"', batch.pk]
    if kind:
        where.append("kind = %s")
        params.append(kind)
    return " AND ".join(where), params


def _page_rows(cursor, batch: Batch, query: str, kind: str, after: int, size: int) -> tuple[list, int]:
    """Up to `size` + 1 hits after the entry id `after`, in id order, and the number of hits
    after it, counted up to COUNT_LIMIT + 1.

    The hits are first found in any order, the database stopping at that limit. When that
    is all of them, the page is picked from their ids. Else the page's hits lie at or
    before the (size + 1)th smallest id found (that many hits are there), so the database
    reads the entries of that range in id order, which stops after a page of hits."""
    key = _key()
    where, params = _conditions(batch, query, kind)
    cursor.execute(f"SELECT {key} FROM {TABLE} WHERE {where} AND {key} > %s LIMIT %s",
                   [*params, after, COUNT_LIMIT + 1])
    found = sorted(pk for (pk,) in cursor.fetchall())
    if len(found) <= COUNT_LIMIT:
        ids = found[:size + 1]
        if not ids:
            return [], 0
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(f"SELECT {key}, {ENTRY_COLUMNS} FROM {TABLE} WHERE {key} IN ({marks}) ORDER BY {key}", ids)
    else:
        where, params = _conditions(batch, query, kind, in_id_order=True)
        cursor.execute(f"SELECT {key}, {ENTRY_COLUMNS} FROM {TABLE} WHERE {where} AND {key} > %s AND {key} <= %s "
                       f"ORDER BY {key} LIMIT %s", [*params, after, found[size], size + 1])
    return cursor.fetchall(), len(found)


def search(batch: Batch, query: str, *, kind: str = "", after: int = 0, size: int = PAGE_SIZE) -> HitPage:
    """A page of hits of `query` in `batch` (`kind`: one of KINDS, or "" for all), after the
    entry id `after`."""
    if not MIN_CHARS <= len(query) <= MAX_CHARS or (kind and kind not in KINDS) or not 0 < size < COUNT_LIMIT:
        raise ValueError(f"a query of {MIN_CHARS} to {MAX_CHARS} characters, a kind of {KINDS} and a page "
                         f"smaller than COUNT_LIMIT")
    with connection.cursor() as cursor:
        rows, total = _page_rows(cursor, batch, query, kind, after, size)
    has_next = len(rows) > size
    rows = rows[:size]
    groups = dict(Group.objects.filter(pk__in={r[1] for r in rows}).values_list("pk", "group_id"))
    trajectories = dict(Trajectory.objects.filter(pk__in={r[2] for r in rows if r[2]})
                        .values_list("pk", "trajectory_id"))
    hits = [_hit(row, query, groups, trajectories) for row in rows]
    return HitPage(hits=hits, total=min(total, COUNT_LIMIT), total_is_lower_bound=total > COUNT_LIMIT,
                   next_after=rows[-1][0] if has_next else None)


def _hit(row, query: str, groups: dict, trajectories: dict) -> Hit:
    entry_id, group_pk, trajectory_pk, kind, turn, role, text = row
    # the database's case folding may differ from Python's on rare letters: then show the start
    start, end, n_matches = snippets.locate(text, query)
    group_url = reverse("group", args=[group_pk])
    hit = Hit(entry_id=entry_id, kind=kind, group_pk=group_pk, group_id=groups[group_pk],
              trajectory_pk=trajectory_pk, trajectory_id=trajectories[trajectory_pk] if trajectory_pk else "",
              turn=turn, role=role, snippet=snippets.snippet(text, start, end, query), matches=n_matches,
              url=group_url)
    if kind == PATCH:
        hit.place = snippets.patch_place(text, start)
        if hit.place.hunk is not None:
            hit.url = f"{group_url}#{hunk_anchor(trajectory_pk, hit.place.path, hit.place.hunk)}"
            query_string = urlencode({"path": hit.place.path, "start": hit.place.row})
            hit.detail_url = f"{reverse('patch_file', args=[trajectory_pk])}?{query_string}"
        else:
            hit.url = f"{group_url}#t-{trajectory_pk}"
            hit.detail_url = reverse("patch_raw", args=[trajectory_pk])
    elif kind == TURN:
        anchor = f"turn-{trajectory_pk}-{turn}"
        hit.url = f"{group_url}#{anchor}"
        hit.detail_url = f"{reverse('transcript', args=[trajectory_pk])}?start={turn}#{anchor}"
    elif kind != STATEMENT:
        raise ValueError(f"entry {entry_id} has an unknown kind {kind!r}")
    return hit
