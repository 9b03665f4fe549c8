"""Writes of training runs: attaching a step to its run, the figures' recompute and sweep,
and pruning old steps.

A step is one batch, named `<run>/step-<n>`. Every way a step comes in (the online step API,
the trainer integrations through it, `import_rollouts --run NAME --step N`) goes through
`step_import`: the run is created on first use, and a step number that repeats or goes back
below the run's latest is refused, naming the step it collides with, unless the caller asks
to `append` (as for a batch). The API also takes a step sent again with identical content (a
client's retry) as a no-op.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max
from django.utils import timezone

from webapp import work
from webapp.models import Batch, BatchFigures, BatchPatch, Run, RunStep, SearchState, Trajectory, Transcript
from webapp.models.runs import RUN_NAME_MAX_CHARS
from webapp.names import name_problem
from webapp.runs.figures import BatchChanged, batch_figures
from webapp.runs.selectors import series_row

log = logging.getLogger(__name__)

MAX_STEP = 10**12
# A recompute requested this long ago and still not done: its message is taken as lost (or its
# worker as killed), and the sweep sends it again.
LOST_AFTER = timedelta(minutes=1)
REPEAT_AFTER_S = 2  # a batch whose figures were requested again while computed: computed again after this
SWEEP_SENDS = 200  # recomputes one sweep sends at most; the next sweep sends the rest
FAILURE_CHARS = 2000


class StepRefused(ValueError):
    """A step the run cannot take as asked; the message names the step it collides with."""


def run_name_problem(name: str) -> str | None:
    """Why `name` cannot name a run, if it cannot."""
    if problem := name_problem(name, what="run", max_chars=RUN_NAME_MAX_CHARS):
        return problem
    if name != name.strip():
        return "must not start or end with spaces"
    return None


def step_batch_name(run: str, number: int) -> str:
    return f"{run}/step-{number}"


@dataclass(frozen=True)
class StepImport:
    run: Run
    step: RunStep
    result: Any  # what `import_batch` returned (webapp.batches.services.ImportResult)
    created: bool  # a new step of the run


def step_import(*, run_name: str, number: int, append: bool, import_batch: Callable[[str, bool], Any],
                user=None, retry_ok: bool = False) -> StepImport:
    """Import step `number` of the run `run_name` (created on first use) with
    `import_batch(batch name, extend)`, which imports into that batch (extending it when
    `extend`) and returns its ImportResult, raising for bad input; all or nothing.

    StepRefused, nothing written, when the name is bad, or, unless `append`, when the run has
    that step already (`retry_ok`: unless what is sent is all there already, a retry) or a later
    one (the number goes backwards)."""
    problem = run_name_problem(run_name)
    if problem:
        raise StepRefused(f"run: {problem}")
    if not 0 <= number <= MAX_STEP:
        raise StepRefused(f"step: must be a whole number from 0 to {MAX_STEP}, got {number}")
    with transaction.atomic():
        run, _ = Run.objects.get_or_create(name=run_name, defaults={"created_by": user})
        # The run's row lock queues the steps of one run, so two cannot take the same number.
        run = Run.objects.select_for_update().get(pk=run.pk)
        step = RunStep.objects.filter(run=run, number=number).select_related("batch").first()
        latest = RunStep.objects.filter(run=run).order_by("-number").select_related("batch").first()
        if step is None and latest is not None and number < latest.number and not append:
            raise StepRefused(f"step {number} goes backwards: run {run_name!r} is at step {latest.number} (batch "
                              f"{latest.batch.name!r}); send its steps in order, or append to add an earlier one")
        repeat = (f"run {run_name!r} already has step {number} (batch {step.batch.name!r}); append to add to it"
                  if step is not None else "")
        if repeat and not append and not retry_ok:
            raise StepRefused(repeat)
        result = import_batch(step_batch_name(run_name, number), step is not None or append)
        if repeat and not append and result.new_trajectories:
            transaction.set_rollback(True)
            raise StepRefused(f"{repeat} (what was sent differs from what it holds)")
        created = step is None
        if created:
            step = RunStep.objects.create(run=run, number=number, batch=result.batch)
            copied = _copy_of_an_earlier_step(step)
            if copied is not None:
                result.notes.note(f"every rollout of step {number} is already in step {copied.number} (batch "
                                  f"{copied.batch.name!r}) with the same content: the same file imported again?")
    return StepImport(run=run, step=step, result=result, created=created)


def _copy_of_an_earlier_step(step: RunStep) -> RunStep | None:
    """The earlier step of `step`'s run that holds every rollout of `step`, content and all: a
    file imported twice is accepted as a new step (its batch is new), but it is no new data."""
    hashes = set(Trajectory.objects.filter(batch=step.batch_id).values_list("content_hash", flat=True))
    if not hashes:
        return None
    earlier = {s.batch_id: s for s in RunStep.objects.filter(run=step.run_id, number__lt=step.number)
               .select_related("batch")}
    holding = (Trajectory.objects.filter(batch__in=list(earlier), content_hash__in=hashes)
               .values("batch").annotate(n=Count("content_hash", distinct=True)).filter(n=len(hashes))
               .order_by("-batch").values_list("batch", flat=True).first())
    return earlier.get(holding)


def step_answered(batch: Batch) -> None:
    """The trainer has read the rewards of `batch`'s step (the API's answer): its wait ends here."""
    RunStep.objects.filter(batch=batch).update(answered_at=timezone.now())


# --- figures -------------------------------------------------------------------------------

def figures_refresh(batch_id: int) -> None:
    """Compute the figures of batch `batch_id` and store them (a worker's task). A write that
    requested them again while they were computed has them computed again shortly after; one
    that fails records why and keeps the previous figures."""
    started = timezone.now()
    if not Batch.objects.filter(pk=batch_id).exists():
        return
    asked = BatchFigures.objects.filter(batch_id=batch_id).values_list("requested_at", "computed_at").first()
    if asked is not None and asked[0] is None and asked[1] is not None:
        return  # a message sent twice: computed since it was asked for
    begun = time.monotonic()
    try:
        measures, panel = batch_figures(batch_id)
    except BatchChanged:
        work.run_figures_send(batch_id, countdown=REPEAT_AFTER_S)
        return
    except Exception as error:  # one batch's failure must not hide the others' figures
        log.exception("figures of batch %s failed", batch_id)
        reason = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"[:FAILURE_CHARS]
        BatchFigures.objects.filter(batch_id=batch_id, requested_at__lte=started).update(
            error=reason, requested_at=None)
        return
    measures["compute_s"] = round(time.monotonic() - begun, 4)
    BatchFigures.objects.update_or_create(batch_id=batch_id, defaults={
        "measures": measures, "series": series_row(measures), "panel": panel, "computed_at": timezone.now(),
        "error": ""})
    done = BatchFigures.objects.filter(batch_id=batch_id, requested_at__lte=started).update(requested_at=None)
    if not done and BatchFigures.objects.filter(batch_id=batch_id).exclude(requested_at=None).exists():
        work.run_figures_send(batch_id, countdown=REPEAT_AFTER_S)


def figures_sweep() -> int:
    """Send again the recomputes requested over LOST_AFTER ago and not sent since (a message the
    broker refused, a worker killed mid-update: its batch keeps the previous figures and stays
    requested); how many were sent."""
    due = timezone.now() - LOST_AFTER
    stale = (BatchFigures.objects.filter(requested_at__lt=due).exclude(sent_at__gte=due)
             .order_by("requested_at").values_list("batch_id", flat=True)[:SWEEP_SENDS])
    sent = 0
    for batch_id in list(stale):
        if not work.run_figures_send(batch_id):
            break
        sent += 1
    if sent:
        log.warning("figures sweep: %d recomputes sent again", sent)
    return sent


# --- retention -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Pruned:
    steps: list[int]  # the step numbers pruned now
    transcripts: int
    renders: int  # the batches' hold on rendered patches (the render sweep deletes those no batch holds)
    search_entries: int


def run_prune(*, run: Run, keep_last: int) -> Pruned:
    """Remove the heavy fields of every step of `run` but the last `keep_last`: transcripts,
    rendered patches, search entries. Rankings, gradings, patches, advantages and figures stay.
    Steps pruned before are left as they are."""
    if keep_last < 0:
        raise ValueError(f"keep_last must be 0 or more, got {keep_last}")
    numbers = list(RunStep.objects.filter(run=run).order_by("-number").values_list("number", flat=True))
    old = RunStep.objects.filter(run=run, number__in=numbers[keep_last:], pruned_at=None)
    steps = list(old.order_by("number").values_list("number", "batch_id"))
    transcripts = renders = entries = 0
    for number, batch_id in steps:
        with transaction.atomic():
            transcripts += Transcript.objects.filter(trajectory__batch_id=batch_id).delete()[0]
            renders += BatchPatch.objects.filter(batch_id=batch_id).delete()[0]
            entries += _search_entries_delete(batch_id)
            RunStep.objects.filter(run=run, number=number).update(pruned_at=timezone.now())
    return Pruned(steps=[number for number, _ in steps], transcripts=transcripts, renders=renders,
                  search_entries=entries)


def _search_entries_delete(batch_id: int) -> int:
    """Empty the batch's search index (a table of the database's own kind, migration
    0010_search_index) and mark it complete, so that nothing indexes the batch again."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM webapp_search_entry WHERE batch_id = %s", [batch_id])
        deleted = max(cursor.rowcount, 0)
    batch = Batch.objects.get(pk=batch_id)
    top = Trajectory.objects.filter(batch_id=batch_id).aggregate(top=Max("pk"))["top"] or 0
    SearchState.objects.update_or_create(batch_id=batch_id, defaults={
        "indexed_through": top, "n_indexed": batch.n_trajectories})
    return deleted
