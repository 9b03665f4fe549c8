"""A whole run's advantages: one Parquet dataset partitioned by step, and one manifest.

    step=0/advantages.parquet
    step=1/advantages.parquet
    ...
    _manifest.json  (the run; per step its batch, advantage config, counts, file size and sha256;
                    named with "_" so that dataset readers, pyarrow's and Spark's, skip it)

Each step's file is the batch's advantages export (webapp.exports.advantages: the same schema
and bytes), under that step's own advantage config; `pyarrow.dataset.dataset(folder,
partitioning="hive")` reads them as one table with a `step` column. Written to a folder
(`manage.py export advantages --run NAME`) or streamed as a tar (the run page, the API). A
run's steps are small batches (a thousand trajectories), and reading each alone cost more
than writing it: the steps are read a window at a time (`advantage_chunks_of_batches`), and
their files written many per call by pyarrow's dataset writer, on a thread, while the next
steps are read. Memory stays that of a few windows of steps, whatever the run's size.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tempfile
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np
import orjson
from django.conf import settings
from django.utils import timezone

from webapp.advantages.chunks import SOURCES, AdvantageChunk
from webapp.advantages.config import AdvantageConfig, parse_advantage_config
from webapp.advantages.selectors import advantage_chunks_of_batches
from webapp.exports.advantages import (
    SCHEMA,
    Written,
    collecting_new_objects_only,
    counted,
    parts_table,
    write_parquet,
    write_parts,
    write_tables,
    writer_version,
)
from webapp.exports.services import refuse_while_grading
from webapp.models import Run, RunStep
from webapp.rankings import Viewer

MANIFEST = "_manifest.json"
DATA_FILE = "advantages.parquet"
# The steps whose files one call of the writer writes, at most: enough that the per-call
# costs are small, few enough (in steps and in rows) that their tables stay small.
STEPS_PER_WRITE = 32
ROWS_PER_WRITE = 65_536


def step_path(number: int) -> str:
    return f"step={number}/{DATA_FILE}"


def run_steps_for_export(run: Run, *, viewer: Viewer, allow_ungraded: bool) -> list[RunStep]:
    """The steps of `run` in order; RankingsHidden unless `viewer` may see every ranking, and
    GradingUnfinished (naming the step) while a step is being graded, unless `allow_ungraded`."""
    steps = list(RunStep.objects.filter(run=run).select_related("batch__annotation_policy").order_by("number"))
    for step in steps:
        viewer.require_whole(step.batch)
        if not allow_ungraded:
            refuse_while_grading(step.batch)
    return steps


def write_steps(steps: list[RunStep], folder: Path, *, viewer: Viewer) -> Iterator[dict]:
    """Write each step's file in `folder`, at its `step_path`; each step's manifest entry once
    its file is written, in order.

    The steps are read a window at a time here, and every STEPS_PER_WRITE of them (fewer
    past ROWS_PER_WRITE rows) made one table, whose files a thread has pyarrow write in one
    call (`write_parts`) while the next steps are read: writing was a third of the export's
    time. At most two such writes wait, so memory stays flat. A step too large for a window
    is read a chunk at a time and written here as it is read, after the steps before it."""
    configs = [parse_advantage_config(step.batch.advantage_config) for step in steps]
    read = advantage_chunks_of_batches([(step.batch, config) for step, config in zip(steps, configs, strict=True)],
                                       viewer=viewer)
    gathered: list[_Step] = []
    writing: deque[tuple[list[_Step], Future]] = deque()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-export") as writer, collecting_new_objects_only():
        def write_gathered():
            keys = np.repeat([s.step.number for s in gathered], [s.written.rows for s in gathered])
            if keys.size:
                table = parts_table([(s.step.batch.name, s.chunks) for s in gathered])
                write = writer.submit(write_parts, table, keys, folder, column="step")
            else:  # steps without rows only: nothing for pyarrow to write
                write = Future()
                write.set_result({})
            writing.append((gathered[:], write))
            gathered.clear()

        for step, config, (_, chunks) in zip(steps, configs, read, strict=True):
            if step.batch.n_groups > settings.GAGAR_EXPORT_CHUNK_GROUPS:
                if gathered:
                    write_gathered()
                while writing:
                    yield from _written(*writing.popleft(), folder)
                path = folder / step_path(step.number)
                path.parent.mkdir(parents=True)
                yield _entry(step, config, write_parquet(step.batch, chunks, path), path)
                continue
            written = Written()
            gathered.append(_Step(step, config, written, counted(step.batch, chunks, written)))
            if len(gathered) == STEPS_PER_WRITE or sum(s.written.rows for s in gathered) >= ROWS_PER_WRITE:
                write_gathered()
            if len(writing) > 1:
                yield from _written(*writing.popleft(), folder)
        if gathered:
            write_gathered()
        while writing:
            yield from _written(*writing.popleft(), folder)


@dataclass
class _Step:
    step: RunStep
    config: AdvantageConfig
    written: Written
    chunks: list[AdvantageChunk]


def _written(steps: list[_Step], write: Future, folder: Path) -> Iterator[dict]:
    """The entries of `steps` once `write` has written their files, each renamed to its `step_path`."""
    files = write.result()
    for s in steps:
        path = folder / step_path(s.step.number)
        if s.step.number in files:
            files[s.step.number].rename(path)
        else:  # no rows, for which the dataset writer makes no file: the schema and no row group
            path.parent.mkdir(parents=True)
            with path.open("wb") as out:
                write_tables([], out)
        yield _entry(s.step, s.config, s.written, path)


def _entry(step: RunStep, config: AdvantageConfig, written: Written, path: Path) -> dict:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return {"step": step.number, "batch": step.batch.name, "path": step_path(step.number),
            "config": config.as_dict(), "rows": written.rows,
            "counts": {"label": dict(written.labels), "source": {s: written.sources[s] for s in SOURCES}},
            "ungraded": written.ungraded(), "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def manifest(run: Run, entries: list[dict]) -> dict:
    return {"run": run.name, "kind": "advantages", "format": "parquet", "partitioning": "hive: step",
            "rows": sum(e["rows"] for e in entries), "steps": entries,
            "columns": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in SCHEMA],
            "writer": writer_version(), "app_version": version("gagar-studio"),
            "created_at": timezone.now().isoformat()}


def write_run_dataset(run: Run, folder: Path, *, viewer: Viewer, allow_ungraded: bool = False) -> dict:
    """Write the dataset into `folder` (made here, must not exist), the manifest last; the manifest."""
    steps = run_steps_for_export(run, viewer=viewer, allow_ungraded=allow_ungraded)
    folder.mkdir(parents=True)
    out = manifest(run, list(write_steps(steps, folder, viewer=viewer)))
    (folder / MANIFEST).write_bytes(_json(out))
    return out


def run_dataset_tar(run: Run, *, viewer: Viewer, allow_ungraded: bool = False) -> Iterator[bytes]:
    """The dataset as an uncompressed tar stream (Parquet is compressed already), each step
    written to a scratch file, sent and removed before the next. The checks (hidden rankings,
    grading under way) happen at once, before the first byte."""
    steps = run_steps_for_export(run, viewer=viewer, allow_ungraded=allow_ungraded)
    return _tar(run, steps, viewer)


def _tar(run: Run, steps: list[RunStep], viewer: Viewer) -> Iterator[bytes]:
    sink = _Sink()
    scratch = Path(tempfile.mkdtemp(prefix="run-export-", dir=_scratch_root()))
    try:
        with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            entries = []
            for entry in write_steps(steps, scratch, viewer=viewer):
                entries.append(entry)
                path = scratch / entry["path"]
                tar.add(path, arcname=entry["path"])
                path.unlink()
                yield sink.take()
            data = _json(manifest(run, entries))
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime = len(data), int(timezone.now().timestamp())
            tar.addfile(info, io.BytesIO(data))
        yield sink.take()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _json(manifest: dict) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def _scratch_root() -> Path:
    root = settings.DATA_DIR / "scratch"
    root.mkdir(parents=True, exist_ok=True)
    return root


class _Sink(io.RawIOBase):
    """What tarfile writes, kept until taken."""

    def __init__(self):
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out
