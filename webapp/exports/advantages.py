"""The advantages export: one row per trajectory of a batch, in a registered format
(webapp/exports/formats.py): the Parquet and JSON Lines writers are here.

Byte-reproducible: the same rows and config give the same bytes. Nothing in the
data file depends on when or by whom it was made (that is the manifest's), rows
come in code point order of (group_id, trajectory_id), and the Parquet writer's
options, row-group size included, are fixed here. Memory stays flat in batch
size: rows are read a chunk of whole groups at a time and written a row group
(Parquet) or a line (JSON Lines) at a time.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.dataset as pa_dataset
import pyarrow.parquet as pq

from webapp.advantages.chunks import MISSING_SCORES, RANKING_MISMATCH, AdvantageChunk
from webapp.advantages.config import AdvantageConfig
from webapp.advantages.selectors import advantage_chunks
from webapp.exports.formats import ADVANTAGES, export_format
from webapp.exports.selectors import UNGRADED, ungraded_reasons
from webapp.models import Batch
from webapp.rankings import Viewer

SCHEMA = pa.schema([
    pa.field("batch", pa.string(), nullable=False),
    pa.field("group_id", pa.string(), nullable=False),
    pa.field("trajectory_id", pa.string(), nullable=False),
    pa.field("reward", pa.float64(), nullable=False),
    pa.field("corrected_reward", pa.float64()),  # null: no human overrode the test verdict
    pa.field("passed", pa.bool_(), nullable=False),
    pa.field("label", pa.string(), nullable=False),
    pa.field("grpo_advantage", pa.float64(), nullable=False),
    pa.field("factor", pa.float64()),
    pa.field("rank", pa.int32()),
    pa.field("advantage", pa.float64(), nullable=False),
    pa.field("reward_for_trainer", pa.float64(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("source_reason", pa.string(), nullable=False),
    pa.field("flags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
    pa.field("grader", pa.string()),
    pa.field("grader_version", pa.string()),
    pa.field("ranking_version", pa.string()),
])
COLUMNS = tuple(SCHEMA.names)
# Every option that shapes the bytes, pinned; the row-group size is applied by
# `_RowGroups`, so that it does not follow how the rows were read.
PARQUET_OPTIONS = {
    "version": "2.6", "data_page_version": "1.0", "compression": "zstd", "compression_level": 3,
    "use_dictionary": True, "write_statistics": True, "store_schema": True, "use_compliant_nested_type": True,
    "write_page_index": False,
}
ROW_GROUP_ROWS = 65_536
PART_FILE = "part-{i}.parquet"  # `write_parts`' name of a part's file
# A ranking that cannot apply (a group's advantages fell back to GRPO's), as opposed to one
# that applies and leaves them as they are (a single passing trajectory, equal factors).
UNUSABLE = (RANKING_MISMATCH, MISSING_SCORES)

Progress = Callable[[int, int], None]  # (rows written so far, rows in all)


@dataclass
class Written:
    """What a write produced: rows, their counts by group label and by source, the mixed
    groups left without a ranking (and their trajectories) by why (UNGRADED), and what the
    manifest says of the writer (`about`: Parquet's names it, as the file's footer does)."""

    rows: int = 0
    labels: Counter = field(default_factory=Counter)
    sources: Counter = field(default_factory=Counter)
    ungraded_groups: Counter = field(default_factory=Counter)
    ungraded_trajectories: Counter = field(default_factory=Counter)
    about: dict[str, str] = field(default_factory=dict)

    def add(self, batch: Batch, chunk: AdvantageChunk) -> None:
        sizes = np.bincount(chunk.group_index, minlength=len(chunk.group_ids)).tolist()
        unranked: dict[str, int] = {}
        for group_id, size, label, source, reason in zip(chunk.group_ids, sizes, chunk.label, chunk.source,
                                                         chunk.source_reason, strict=True):
            self.labels[label] += size
            self.sources[source] += size
            if label != "mixed":
                continue
            if source == "none":
                unranked[group_id] = size
            elif reason in UNUSABLE:
                self._ungraded("fell_back", size)
        if unranked:  # a query only for a chunk that has some: most have none once graded
            for group_id, why in ungraded_reasons(batch, list(unranked)).items():
                self._ungraded(why, unranked[group_id])
        self.rows += len(chunk)

    def _ungraded(self, why: str, size: int) -> None:
        self.ungraded_groups[why] += 1
        self.ungraded_trajectories[why] += size

    def ungraded(self) -> dict:
        """The manifest's `ungraded`: totals, and per reason (every one listed)."""
        return {"groups": self.ungraded_groups.total(), "trajectories": self.ungraded_trajectories.total(),
                "reasons": {why: {"groups": self.ungraded_groups[why], "trajectories": self.ungraded_trajectories[why]}
                            for why in UNGRADED}}


def write_advantages(batch: Batch, path: Path, *, viewer: Viewer, format: str, config: AdvantageConfig,
                     on_progress: Progress | None = None) -> int:
    """Write the advantages of `batch` under `config` to `path` as `format`, an advantages
    format of webapp/exports/formats.py; `on_progress(rows written, rows in all)` after each
    chunk. Returns the row count."""
    return write_counted(batch, path, viewer=viewer, format=format, config=config, on_progress=on_progress).rows


def write_counted(batch: Batch, path: Path, *, viewer: Viewer, format: str, config: AdvantageConfig,
                  on_progress: Progress | None = None) -> Written:
    """`write_advantages`, returning the counts a manifest reports as well. RankingsHidden,
    before the file is opened, unless `viewer` may see every ranking of `batch`; UnknownFormat
    likewise for a format that is not registered."""
    viewer.require_whole(batch)
    write = export_format(ADVANTAGES, format).write()
    chunks = advantage_chunks(batch, viewer=viewer, config=config)
    with collecting_new_objects_only():
        return write(batch, chunks, path, on_progress=on_progress)


def write_parquet(batch: Batch, chunks: Iterable[AdvantageChunk], path: Path, *,
                  on_progress: Progress | None = None) -> Written:
    """Write `chunks`, the advantages of `batch` in order (`advantage_chunks`'), to `path` as
    Parquet, a chunk at a time; their counts."""
    written = Written(about={"writer": writer_version()})
    with open(path, "wb") as out:
        write_tables((_table(batch.name, chunk) for chunk in _counted(batch, chunks, written, on_progress)), out)
    return written


def write_jsonl(batch: Batch, chunks: Iterable[AdvantageChunk], path: Path, *,
                on_progress: Progress | None = None) -> Written:
    """Write `chunks`, the advantages of `batch` in order, to `path` as JSON Lines, a block of
    lines per chunk; their counts."""
    written = Written()
    with open(path, "wb") as out:
        for chunk in _counted(batch, chunks, written, on_progress):
            out.write(_jsonl(batch.name, chunk))
    return written


def counted(batch: Batch, chunks: Iterable[AdvantageChunk], written: Written) -> list[AdvantageChunk]:
    """`chunks` of `batch`, all taken and counted into `written`."""
    return list(_counted(batch, chunks, written, None))


def parts_table(parts: Sequence[tuple[str, Sequence[AdvantageChunk]]]) -> pa.Table:
    """The rows of each part (batch name, its chunks in order), one part after the other, as
    one table of SCHEMA: what `write_parquet` writes of each. One table for many small
    batches: building a table has a cost per call that was a sixth of a run's export."""
    chunks = [chunk for _, part in parts for chunk in part]
    names = np.repeat(np.array([name for name, part in parts for _ in part], dtype=object), [len(c) for c in chunks])
    return _table(pa.array(names, pa.string()), AdvantageChunk.concatenated(chunks))


def write_tables(tables: Iterable[pa.Table], out: BinaryIO | pa.NativeFile) -> None:
    """Write `tables`, the rows of one export in order, to `out` as one Parquet file. The
    bytes depend on the rows only, not on how they were cut into tables."""
    with pq.ParquetWriter(out, SCHEMA, **PARQUET_OPTIONS) as writer:
        row_groups = _RowGroups(writer)
        for table in tables:
            row_groups.write(table)
        row_groups.flush()


def write_parts(table: pa.Table, keys: np.ndarray, folder: Path, *, column: str) -> dict[int, Path]:
    """Write the rows of `table` of each key (`keys`, one per row, each key's rows together)
    as one Parquet file in folder/<column>=<key>/, with the bytes `write_tables` gives them
    (the same options and row groups); the file of each key. One call of pyarrow's dataset
    writer writes them all, encoding on its own threads without the GIL: a Python thread
    writing small files one by one spent most of its time waiting for the GIL. A key
    without rows gets no file."""
    pa_dataset.write_dataset(
        table.append_column(column, pa.array(keys, pa.int64())), folder, format="parquet",
        file_options=pa_dataset.ParquetFileFormat().make_write_options(**PARQUET_OPTIONS),
        partitioning=pa_dataset.partitioning(pa.schema([(column, pa.int64())]), flavor="hive"),
        basename_template=PART_FILE, existing_data_behavior="overwrite_or_ignore", preserve_order=True,
        max_rows_per_file=0, max_rows_per_group=ROW_GROUP_ROWS, min_rows_per_group=ROW_GROUP_ROWS)
    return {key: folder / f"{column}={key}" / PART_FILE.format(i=0) for key in np.unique(keys).tolist()}


@contextmanager
def collecting_new_objects_only():
    """Keep the cyclic garbage collector's passes to the objects made from here on. An
    export makes a tuple per row read, and each full pass also went over every object the
    process already held (Django, numpy, pyarrow): a sixth of the export's time. Reference
    counting frees each chunk as before, and cycles among new objects are still collected."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _counted(batch: Batch, chunks: Iterable[AdvantageChunk], written: Written,
             on_progress: Progress | None) -> Iterator[AdvantageChunk]:
    """`chunks` of `batch`, each counted (and progress told) once the caller has written it."""
    for chunk in chunks:
        yield chunk
        written.add(batch, chunk)
        if on_progress:
            on_progress(written.rows, batch.n_trajectories)


def advantage_jsonl_lines(batch: Batch, *, viewer: Viewer, config: AdvantageConfig) -> Iterator[bytes]:
    """The JSON Lines export of `batch`, a block of whole lines per chunk of groups: the same
    bytes as `write_advantages(format="jsonl")`, for a streaming response. RankingsHidden at
    once (not mid-stream) unless `viewer` may see every ranking of `batch`."""
    viewer.require_whole(batch)
    return (_jsonl(batch.name, chunk) for chunk in advantage_chunks(batch, viewer=viewer, config=config))


def _jsonl(batch: str, chunk: AdvantageChunk) -> bytes:
    lines = []
    for row in chunk.rows():
        row = {"batch": batch, **row, "reward_for_trainer": row["advantage"]}
        lines.append(orjson.dumps({name: row[name] for name in COLUMNS}))
    lines.append(b"")
    return b"\n".join(lines)


PER_GROUP = ("group_id", "label", "source", "source_reason", "grader", "grader_version", "ranking_version")


def _table(batch: str | pa.Array, chunk: AdvantageChunk) -> pa.Table:
    """`chunk`'s rows, of the batch named `batch` (or per row, an array)."""
    n = len(chunk)
    # The columns with one value per group, spread to their trajectories by one take.
    per_group = pa.table([pa.array(values, pa.string()) for values in (
        chunk.group_ids, chunk.label, chunk.source, chunk.source_reason, chunk.grader, chunk.grader_version,
        chunk.ranking_version)], names=PER_GROUP).take(chunk.group_index)
    # `reward_for_trainer` is `advantage`: GAGAR advantages sum to zero in a group, so a
    # trainer that subtracts the group mean (without std scaling) gives them back unchanged.
    advantage = pa.array(chunk.advantage, pa.float64())
    return pa.Table.from_arrays([
        pa.repeat(pa.scalar(batch, pa.string()), n) if isinstance(batch, str) else batch,
        per_group["group_id"],
        pa.array(chunk.trajectory_ids, pa.string()),
        pa.array(chunk.reward, pa.float64()),
        pa.array(chunk.corrected_reward, pa.float64(), mask=np.isnan(chunk.corrected_reward)),
        pa.array(chunk.passed, pa.bool_()),
        per_group["label"],
        pa.array(chunk.grpo_advantage, pa.float64()),
        pa.array(chunk.factor, pa.float64(), mask=np.isnan(chunk.factor)),
        pa.array(chunk.rank.astype(np.int32), pa.int32(), mask=chunk.rank == 0),
        advantage,
        advantage,
        per_group["source"],
        per_group["source_reason"],
        _flags(chunk),
        per_group["grader"],
        per_group["grader_version"],
        per_group["ranking_version"],
    ], schema=SCHEMA)


def _flags(chunk: AdvantageChunk) -> pa.Array:
    """list<string> per trajectory from the few that have flags: offsets and values only."""
    counts = np.zeros(len(chunk), dtype=np.int32)
    values: list[str] = []
    for i in sorted(chunk.flags):
        counts[i] = len(chunk.flags[i])
        values.extend(chunk.flags[i])
    offsets = np.zeros(len(chunk) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.string()),
                                    type=SCHEMA.field("flags").type)


class _RowGroups:
    """Hands a Parquet writer row groups of exactly ROW_GROUP_ROWS rows (the last one fewer),
    whatever the size of the tables handed in. A writer given no row at all still makes a
    valid file, with the schema and no row group (an empty batch)."""

    def __init__(self, writer: pq.ParquetWriter):
        self.writer = writer
        self.pending: list[pa.Table] = []
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.rows += table.num_rows
        if self.rows >= ROW_GROUP_ROWS:
            whole = pa.concat_tables(self.pending)
            full = whole.num_rows - whole.num_rows % ROW_GROUP_ROWS
            self.writer.write_table(whole.slice(0, full), row_group_size=ROW_GROUP_ROWS)
            rest = whole.slice(full)
            self.pending, self.rows = [rest], rest.num_rows

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.concat_tables(self.pending), row_group_size=ROW_GROUP_ROWS)


def writer_version() -> str:
    """What Parquet files say wrote them (their `created_by`): the pinned pyarrow's C++ writer.
    The bytes are reproducible for one such version; the manifest names it."""
    return f"parquet-cpp-arrow version {pa.__version__}"
