"""A batch's advantages read from the database: its groups a page of whole groups at a
time (a keyset in code point order of group id), their trajectories as columns (by COPY and
CSV on PostgreSQL) and their final rankings, each page computed as one chunk
(`webapp.advantages.chunks`). Large batches are read a chunk at a time (`advantage_chunks`);
many small ones, a run's steps, a window of batches at a time (`advantage_chunks_of_batches`)."""

import json
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
from django.conf import settings
from django.db import connection
from django.db.models import F, QuerySet
from django.db.models.functions import Collate

from webapp.advantages.chunks import AdvantageChunk, TrajectoryColumns, advantage_chunk
from webapp.advantages.config import AdvantageConfig, parse_advantage_config
from webapp.models import Batch, Group, Trajectory
from webapp.rankings import FinalRanking, Viewer, final_rankings, pk_array


def advantage_rows(batch: Batch, *, viewer: Viewer, config: AdvantageConfig | None = None) -> list[dict]:
    """Rows of ROW_FIELDS for every trajectory of `batch`; RankingsHidden unless `viewer` may
    see every group's ranking (`advantage_chunks`)."""
    return [row for chunk in advantage_chunks(batch, viewer=viewer, config=config) for row in chunk.rows()]


def ranking_advantage_rows(group: Group, ranking: FinalRanking | None, trajectories=None) -> list[dict]:
    """Rows of ROW_FIELDS for one group as if `ranking` were its final ranking (None: no
    ranking): what the group page shows once it has decided, and the editor's live preview.
    `trajectories` (Trajectory objects of the group) saves the page a query."""
    config = parse_advantage_config(group.batch.advantage_config)
    if trajectories is None:
        rows, _ = trajectory_columns([group.pk])
    else:
        rows = TrajectoryColumns.of(sorted(((group.pk, t.trajectory_id, t.reward, t.passed) for t in trajectories),
                                           key=lambda t: t[1]))
    rankings = {group.pk: ranking} if ranking is not None else {}
    return advantage_chunk(rows, {group.pk: group.group_id}, config, rankings).rows()


def advantage_chunks(batch: Batch, *, viewer: Viewer, config: AdvantageConfig | None = None
                     ) -> Iterator[AdvantageChunk]:
    """The advantages of every trajectory of `batch`, GAGAR_EXPORT_CHUNK_GROUPS groups at a time, in
    code point order of (group id, trajectory id) whatever the database's collation. A group
    never straddles two chunks: its advantages depend on all its trajectories. Memory stays
    that of one chunk, however large the batch.

    Advantages carry every ranking's order and flags, so RankingsHidden (before any row) unless
    `viewer` may see the rankings of all of the batch's groups."""
    viewer.require_whole(batch)
    config = config or parse_advantage_config(batch.advantage_config)
    after = None
    while True:
        page = list(next_groups(batch, after, settings.GAGAR_EXPORT_CHUNK_GROUPS))
        if not page:
            return
        rows, _ = trajectory_columns([pk for pk, _ in page])
        yield advantage_chunk(rows, dict(page), config, final_rankings(dict(page), viewer=viewer, lean=True))
        after = page[-1][1]


def advantage_chunks_of_batches(batches: Sequence[tuple[Batch, AdvantageConfig]], *, viewer: Viewer
                                ) -> Iterator[tuple[Batch, Iterable[AdvantageChunk]]]:
    """Each of `batches`, (batch, config) in order, with the chunks that `advantage_chunks(batch,
    viewer=viewer, config=config)` gives: the same rows, read with fewer queries. Consecutive
    batches of at most GAGAR_EXPORT_CHUNK_GROUPS groups in all (by `Batch.n_groups`) are read
    together, a query for their groups, one for their trajectories and `final_rankings`' for
    their rankings: a run's steps are batches of a thousand trajectories, and these queries
    per batch were most of their export. A batch of more groups is read alone, a chunk at a
    time. Memory stays that of one window; take a batch's chunks before asking for the next.

    RankingsHidden, before any row, unless `viewer` may see the rankings of every batch."""
    for batch, _ in batches:
        viewer.require_whole(batch)
    for window in _windows(batches, settings.GAGAR_EXPORT_CHUNK_GROUPS):
        if len(window) == 1 and window[0][0].n_groups > settings.GAGAR_EXPORT_CHUNK_GROUPS:
            batch, config = window[0]
            yield batch, advantage_chunks(batch, viewer=viewer, config=config)
        else:
            yield from _window_chunks(window, viewer)


def _windows(batches: Sequence[tuple[Batch, AdvantageConfig]], limit: int
             ) -> Iterator[list[tuple[Batch, AdvantageConfig]]]:
    """`batches` cut in runs of consecutive ones of at most `limit` groups in all; a batch of
    more groups makes a window of its own."""
    window: list[tuple[Batch, AdvantageConfig]] = []
    groups = 0
    for batch, config in batches:
        if window and groups + batch.n_groups > limit:
            yield window
            window, groups = [], 0
        window.append((batch, config))
        groups += batch.n_groups
    if window:
        yield window


def _window_chunks(window: list[tuple[Batch, AdvantageConfig]], viewer: Viewer
                   ) -> Iterator[tuple[Batch, list[AdvantageChunk]]]:
    """Each batch of `window` with its advantages as one chunk (none for a batch without
    groups), as `advantage_chunks` reads a batch that fits in a chunk; each computed when asked for."""
    # The batches as a list: as a subquery, PostgreSQL planned a scan of every group.
    groups = (Group.objects.filter(batch__in=[batch.pk for batch, _ in window])
              .alias(key=_binary("group_id")).order_by("batch_id", "key").values_list("batch_id", "pk", "group_id"))
    pages: dict[int, list[tuple[int, str]]] = {batch.pk: [] for batch, _ in window}
    for batch_pk, pk, group_id in groups:
        pages[batch_pk].append((pk, group_id))
    pks = [pk for page in pages.values() for pk, _ in page]
    rows, bounds = trajectory_columns(pks)
    rankings = final_rankings(pks, viewer=viewer, lean=True)
    first = 0  # the position in `pks` of the batch's first group
    for batch, config in window:
        page = pages.pop(batch.pk)
        last = first + len(page)
        chunk = rows.slice(bounds[first], bounds[last])
        yield batch, [advantage_chunk(chunk, dict(page), config, rankings)] if page else []
        first = last


def next_groups(batch: Batch, after: str | None, n: int) -> QuerySet:
    """(pk, group id) of the first `n` groups of `batch` after group id `after` (None: from the
    first), in code point order of group id: one page of the keyset an export reads."""
    groups = Group.objects.filter(batch=batch).alias(key=_binary("group_id")).order_by("key")
    if after is not None:
        groups = groups.filter(key__gt=after)
    return groups.values_list("pk", "group_id")[:n]


def _binary(field: str):
    """`field` compared byte by byte: PostgreSQL's default collation may order text by
    language; SQLite's is already binary. UTF-8 bytes sort as Python sorts the strings.
    On PostgreSQL an index on (batch, group id COLLATE "C") serves the keyset of groups."""
    return Collate(field, "C") if connection.vendor == "postgresql" else F(field)


_CSV_COLUMNS = {"position": pa.int64(), "group_pk": pa.int64(), "trajectory_id": pa.string(), "reward": pa.float64(),
                "passed": pa.bool_()}


def trajectory_columns(pks: list[int]) -> tuple[TrajectoryColumns, list[int]]:
    """The trajectories of the groups `pks` in that order of groups, then by trajectory id
    compared as `_binary` does; and where each group's rows start, with the end last
    (len(pks) + 1 offsets: group i's rows are bounds[i]:bounds[i + 1]).

    The pks are one parameter, an array (PostgreSQL) or JSON (SQLite) whose positions order
    the groups. On PostgreSQL the rows come by COPY as CSV and pyarrow parses them into
    columns: an export reads every trajectory, and a Python tuple per row cost more than
    the query. The unique (group, trajectory id) index covers reward and passed, so the
    rows are read from the index alone (with the cast: trajectory_id's declared 512
    characters make a sort look large enough to plan a scan of the whole table instead)."""
    table = connection.ops.quote_name(Trajectory._meta.db_table)
    if connection.vendor == "postgresql":
        position, rows = _copied_columns(
            f"SELECT p.position, t.group_id, t.trajectory_id, t.reward, t.passed "
            f"FROM unnest(%s::bigint[]) WITH ORDINALITY AS p(pk, position) JOIN {table} t ON t.group_id = p.pk "
            f'ORDER BY p.position, CAST(t.trajectory_id AS TEXT) COLLATE "C"', [pk_array(pks)])
    else:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT p.key + 1, t.group_id, t.trajectory_id, t.reward, t.passed "
                           f"FROM json_each(%s) p JOIN {table} t ON t.group_id = p.value "
                           f"ORDER BY p.key, t.trajectory_id", [json.dumps(list(pks))])
            found = cursor.fetchall()
        position = np.array([row[0] for row in found], dtype=np.int64)
        rows = TrajectoryColumns.of([row[1:] for row in found])
    bounds = np.searchsorted(position, np.arange(1, len(pks) + 2), side="left").tolist()
    return rows, bounds


def _copied_columns(query: str, params: list) -> tuple[np.ndarray, TrajectoryColumns]:
    """The rows of `query` (columns as in _CSV_COLUMNS), copied out as CSV and parsed by
    pyarrow: their positions, and the rest as columns."""
    data = bytearray()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)",
                                                           params) as copy:
        for block in copy:
            data += block
    if not data:
        table = pa.table({name: pa.array([], kind) for name, kind in _CSV_COLUMNS.items()})
    else:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(column_names=list(_CSV_COLUMNS), use_threads=False),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(column_types=_CSV_COLUMNS, true_values=["t"], false_values=["f"],
                                                  strings_can_be_null=False, quoted_strings_can_be_null=False))
    return table["position"].to_numpy(), TrajectoryColumns(
        table["group_pk"].to_numpy(), table["trajectory_id"].to_pylist(), table["reward"].to_numpy(),
        table["passed"].to_numpy(zero_copy_only=False))
