"""Importing rollout files into a batch: whole or not at all.

The files are streamed once: valid rollouts are inserted in large chunks
inside one transaction while every error is collected; any error rolls the
whole import back. Adding to an existing batch must be asked for (`append`);
then identical content is skipped and different content for an existing
trajectory is an error. Every import, from the command line, the batches page
or the API, reads under the same limits (`import_limits`: grading/limits.py,
some set by GAGAR_MAX_* settings), so that a small compressed upload cannot keep
a request's thread busy for minutes: it stops at the first limit it passes.
"""

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from django.conf import settings
from django.db import transaction

from grading.advantages import LABELS, group_labels
from grading.formats import ImportNotes, Inputs, check_inputs, read_rollouts_from
from grading.jsonl import ImportStopped
from grading.limits import Limits
from grading.rollouts import (
    ErrorLog,
    Rollout,
    RolloutFormatError,
    legacy_content_hash,
)
from webapp import derived
from webapp.bulk import insert_rows
from webapp.models import Batch, Group, Trajectory, Transcript
from webapp.names import is_utf8, name_problem

CHUNK_SIZE = 2000
BATCH_NAME_MAX_CHARS = Batch._meta.get_field("name").max_length
T = TypeVar("T")


@dataclass(frozen=True)
class ImportResult:
    batch: Batch
    created: bool
    new_groups: int
    new_trajectories: int
    unchanged_trajectories: int
    notes: ImportNotes  # what the format's adapter skipped, and how it read the files

    @property
    def is_noop(self):
        return self.new_trajectories == 0


def batch_import(
    *,
    paths: Iterable[str | Path],
    batch_name: str,
    user=None,
    pass_threshold: float = 1.0,
    append: bool = False,
    on_progress: Callable[[int], None] | None = None,
    file_format: str = "jsonl",
    reports: Iterable[str | Path] = (),
    tasks: Iterable[str | Path] = (),
    name_by_run: bool = False,
) -> ImportResult:
    """Import rollout files into the batch `batch_name`, creating it, or, with `append`,
    adding to it if it exists. `file_format` names the files' format (grading.formats.FORMATS);
    `reports` are the evaluation reports of its runs, one per path, and `tasks` a task file,
    where the format takes them; `name_by_run` names SWE-bench trajectories by their run
    instead of their model (grading/formats/swebench.py).

    Raises RolloutFormatError (nothing written) when the batch name or a file name is bad,
    the files do not fit the format, the batch exists and `append` is not set, or any line
    is bad or conflicts with what the batch already holds.
    """
    inputs = Inputs(paths=list(paths), reports=list(reports), tasks=list(tasks), name_by_run=name_by_run)
    files = [*inputs.paths, *inputs.reports, *inputs.tasks]  # as given: errors name each file as its user wrote it
    names = [Path(p).name for p in files]  # what the batch keeps of them
    batch_name = normalized_batch_name(batch_name)
    errors = ErrorLog(limits=import_limits())
    problem = batch_name_problem(batch_name)
    if problem:
        errors.add("--batch", None, "batch", problem)
    check_inputs(file_format, inputs, errors)
    for path, name in zip(files, names, strict=True):
        if not is_utf8(name):
            errors.add(str(path), None, "file", "name is not valid UTF-8; rename the file")
    if errors:
        raise RolloutFormatError(errors)
    with transaction.atomic():
        batch, created = Batch.objects.select_for_update().get_or_create(
            name=batch_name, defaults={"created_by": user, "pass_threshold": pass_threshold}
        )
        if not created and not append:
            errors.add("--batch", None, "batch", f"batch {batch_name!r} already exists; to add these rollouts "
                       "to it, import with --append (API: append=true), or choose a new name")
            raise RolloutFormatError(errors)
        if not created and batch.pass_threshold != pass_threshold:
            errors.add(
                "--pass-threshold", None, "pass_threshold",
                f"batch {batch_name!r} was imported with pass threshold {batch.pass_threshold}",
            )
            raise RolloutFormatError(errors)
        sorter = _Sorter(batch, errors)
        writer = _BatchWriter(batch, sorter.existing_groups)
        notes = ImportNotes()
        rollouts = read_rollouts_from(file_format, inputs, errors=errors, notes=notes, pass_threshold=pass_threshold)
        chunks = sorter.new_chunks(rollouts)
        # Files are read and checked in a thread, so that reading goes on while the
        # database stores the previous chunk (waiting on it releases the GIL).
        try:
            for count, chunk in _in_background(chunks):
                writer.write(chunk)
                if on_progress:
                    on_progress(count)
        except ImportStopped:  # at a limit (the sorter's errors count too): errors say which
            pass
        if errors:
            transaction.set_rollback(True)
            raise RolloutFormatError(errors)
        if writer.new_trajectories:
            _refresh_counts(batch, writer.touched_group_pks)
            batch.sources = batch.sources + names
            batch.save()
            derived.renders_stale(batch.pk)  # the group pages of the new trajectories, ahead of the first visit
            derived.search_stale(batch.pk)  # search in the new trajectories: a worker indexes them
            derived.batch_figures_stale(batch.pk)  # the step's figures and the grading panel's
    return ImportResult(
        batch=batch,
        created=created,
        new_groups=writer.new_groups,
        new_trajectories=writer.new_trajectories,
        unchanged_trajectories=sorter.unchanged,
        notes=notes,
    )


def import_limits() -> Limits:
    """The limits of an import here: the core's (grading/limits.py), with the group size
    set by GAGAR_MAX_GROUP_SIZE and the lines and decompressed bytes of one import by
    GAGAR_MAX_IMPORT_LINES and GAGAR_MAX_IMPORT_BYTES."""
    return Limits(group_size=settings.GAGAR_MAX_GROUP_SIZE, import_lines=settings.GAGAR_MAX_IMPORT_LINES,
                  import_bytes=settings.GAGAR_MAX_IMPORT_BYTES)


def normalized_batch_name(name: str) -> str:
    """A batch name as given by a user, the way it is stored and looked up: without the
    spaces around it. Every command and form that takes a batch name reads it through this."""
    return name.strip()


def batch_name_problem(name: str) -> str | None:
    """Why `name` cannot name a batch, if it cannot."""
    return name_problem(name, what="batch", max_chars=BATCH_NAME_MAX_CHARS)


class _Sorter:
    """Sorts rollouts against what the batch holds: unchanged, conflicting (an error), or
    new. Reads the database only when created, so it can run in another thread."""

    def __init__(self, batch: Batch, errors: ErrorLog):
        self.batch_name = batch.name
        self.errors = errors
        self.existing_groups: dict[str, int] = dict(
            Group.objects.filter(batch=batch).values_list("group_id", "pk")
        )
        self.existing_hashes: dict[tuple[str, str], str] = {
            (g, t): h
            for g, t, h in Trajectory.objects.filter(batch=batch).values_list(
                "group__group_id", "trajectory_id", "content_hash"
            )
        }
        self.unchanged = 0
        self.group_sizes: dict[str, int] = {}  # of the existing groups this import would add to
        for group_id, _ in self.existing_hashes:
            self.group_sizes[group_id] = self.group_sizes.get(group_id, 0) + 1

    def new_chunks(self, rollouts: Iterable[Rollout]) -> Iterator[tuple[int, list[Rollout]]]:
        """(rollouts read so far, the new ones among them since the last chunk), every
        CHUNK_SIZE rollouts read. After the first error nothing more is new: the import is
        lost, and the files are read on only to report every error."""
        count, new = 0, []
        for count, rollout in enumerate(rollouts, start=1):
            if self._is_new(rollout) and not self.errors:
                new.append(rollout)
            if count % CHUNK_SIZE == 0:
                yield count, new
                new = []
        if new or count % CHUNK_SIZE:
            yield count, new

    def _is_new(self, rollout: Rollout) -> bool:
        known = self.existing_hashes.get((rollout.group_id, rollout.trajectory_id))
        if known is not None:
            if known == rollout.content_hash or known == legacy_content_hash(rollout):
                self.unchanged += 1
            else:
                self._error(rollout, "trajectory_id", "conflicts with the content already imported "
                            f"into batch {self.batch_name!r} for this trajectory")
            return False
        if rollout.group_id in self.existing_groups:
            size = self.group_sizes[rollout.group_id] = self.group_sizes.get(rollout.group_id, 0) + 1
            most = self.errors.limits.group_size
            if size == most + 1:  # the core checks a group within one import; this, with what the batch has
                self._error(rollout, "group_id", f"group {rollout.group_id!r} has more than {most} trajectories, "
                            "the most one group may have")
            else:
                self._error(rollout, "group_id", f"group already imported into batch "
                            f"{self.batch_name!r}; its trajectories cannot change")
            return False
        return True

    def _error(self, rollout: Rollout, field: str, reason: str) -> None:
        self.errors.add(rollout.source, rollout.line, field, reason)


class _BatchWriter:
    """Writes chunks of new rollouts: their groups first, then trajectories and transcripts."""

    def __init__(self, batch: Batch, group_pks: dict[str, int]):
        self.batch = batch
        self.group_pks = dict(group_pks)
        self.groups_with_task: set[str] = set(
            Group.objects.filter(batch=batch).exclude(task_id="").values_list("group_id", flat=True)
        )
        self.touched_group_pks: set[int] = set()
        self.new_groups = 0
        self.new_trajectories = 0

    def write(self, rollouts: list[Rollout]) -> None:
        if not rollouts:
            return
        self._create_groups(rollouts)
        self._set_late_tasks(rollouts)
        batch_pk = self.batch.pk
        pks = insert_rows(
            Trajectory,
            [
                {
                    "batch_id": batch_pk,
                    "group_id": self.group_pks[r.group_id],
                    "trajectory_id": r.trajectory_id,
                    "reward": r.reward,
                    "passed": r.passed,
                    "patch": r.patch,
                    "metrics": r.metrics,
                    "tests": r.tests,
                    "meta": r.meta,
                    "content_hash": r.content_hash,
                }
                for r in rollouts
            ],
        )
        insert_rows(
            Transcript,
            [
                {"trajectory_id": pk, "messages": r.messages}
                for pk, r in zip(pks, rollouts, strict=True)
                if r.messages is not None
            ],
        )
        self.new_trajectories += len(rollouts)
        self.touched_group_pks.update(self.group_pks[r.group_id] for r in rollouts)

    def _create_groups(self, rollouts: list[Rollout]) -> None:
        new: dict[str, dict] = {}
        for r in rollouts:
            if r.group_id not in self.group_pks and r.group_id not in new:
                # Counts and label are set once the import is complete (_refresh_counts).
                new[r.group_id] = {"batch_id": self.batch.pk, "group_id": r.group_id,
                                   **_task_fields(r), "label": Group.Label.SINGLETON,
                                   "n_trajectories": 0, "n_passed": 0, "pass_rate": 0.0}
                if r.task is not None:
                    self.groups_with_task.add(r.group_id)
        self.group_pks.update(zip(new, insert_rows(Group, list(new.values())), strict=True))
        self.new_groups += len(new)

    def _set_late_tasks(self, rollouts: list[Rollout]) -> None:
        """A group's task may arrive on a later line than its first trajectory."""
        for r in rollouts:
            if r.task is not None and r.group_id not in self.groups_with_task:
                Group.objects.filter(pk=self.group_pks[r.group_id]).update(**_task_fields(r))
                self.groups_with_task.add(r.group_id)


def _in_background(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield what `items` yields, computed in a thread at most `depth` items ahead.

    An exception in the thread is raised here; when the caller stops early (or
    fails), the thread is told to stop and joined before this returns.
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                ready.put((item, None))
            ready.put((end, None))
        except BaseException as exc:  # handed over to the caller's thread
            ready.put((end, exc))

    thread = threading.Thread(target=produce, name="import-reader", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = ready.get()
            if exc is not None:
                raise exc
            if item is end:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a put() waiting on a full queue
            with contextlib.suppress(queue.Empty):
                ready.get(timeout=0.05)
        thread.join()


def _task_fields(rollout: Rollout) -> dict:
    task = rollout.task
    if task is None:
        return {"task_id": "", "statement": "", "repo": "", "base_commit": "",
                "reference_patch": None, "task_extra": {}}
    return {
        "task_id": task.id,
        "statement": task.statement,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "reference_patch": task.reference_patch,
        "task_extra": task.extra,
    }


def _refresh_counts(batch: Batch, group_pks: set[int]) -> None:
    """Recompute counts and labels of the groups an import touched, then the batch's."""
    rows = np.array(
        Trajectory.objects.filter(batch=batch).values_list("group_id", "passed"), dtype=np.int64
    ).reshape(-1, 2)
    group_pk, group_index = np.unique(rows[:, 0], return_inverse=True)
    passed = rows[:, 1].astype(bool)
    totals = np.bincount(group_index)
    passes = np.bincount(group_index, weights=passed).astype(np.int64)
    labels = group_labels(passed, group_index)
    # Groups with the same counts get the same fields: one UPDATE per distinct
    # (size, passes), a handful per batch, instead of a CASE per row.
    same_counts: dict[tuple[int, int, int], list[int]] = {}
    for i, pk in enumerate(group_pk.tolist()):
        if pk in group_pks:
            same_counts.setdefault((int(totals[i]), int(passes[i]), int(labels[i])), []).append(pk)
    for (total, passes_, label), pks in same_counts.items():
        for start in range(0, len(pks), CHUNK_SIZE):
            Group.objects.filter(pk__in=pks[start:start + CHUNK_SIZE]).update(
                n_trajectories=total, n_passed=passes_, pass_rate=passes_ / total, label=LABELS[label]
            )
    batch.n_groups = len(group_pk)
    batch.n_trajectories = len(passed)
    batch.n_passed = int(passed.sum())
