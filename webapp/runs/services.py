"""Writes of training runs: attaching a step to its run, the figures' recompute, and pruning
old steps.

A step is one batch, named `<run>/step-<n>`. Every way a step comes in (the online step API,
the trainer integrations through it, `import_rollouts --run NAME --step N`) goes through
`step_import`: the run is created on first use, and a step number that repeats or goes back
below the run's latest is refused, naming the step it collides with, unless the caller asks
to `append` (as for a batch). The API also takes a step sent again with identical content (a
client's retry) as a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from webapp import derived
from webapp.advantages.services import batch_figures_refresh
from webapp.html.renders import renders_release
from webapp.models import Batch, Run, RunStep, Trajectory, Transcript
from webapp.models.runs import RUN_NAME_MAX_CHARS
from webapp.names import name_problem
from webapp.runs.figures import RunFigures
from webapp.runs.selectors import series_row
from webapp.search.services import index_delete

MAX_STEP = 10**12


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

class StepFigures(RunFigures):
    """A step's stored figures: its measures, and each chart line's value flat beside them."""

    def fields(self) -> dict:
        measures = self.measures()
        return {"measures": measures, "series": series_row(measures)}


# The run page's figures, its part of a batch's figures pass (`derived.RUN_FIGURES`).
FIGURES = derived.Part(derived.RUN_FIGURES, lambda subject: StepFigures(*subject))


def figures_refresh(batch_id: int) -> None:
    """Compute the run page's figures of batch `batch_id` alone and store them (the worker
    computes them with the grading panel's, in one pass: webapp.advantages.services.batch_figures_refresh)."""
    batch_figures_refresh(batch_id, (FIGURES,))


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
            renders += renders_release(batch_id=batch_id)
            entries += index_delete(batch_id=batch_id)
            RunStep.objects.filter(run=run, number=number).update(pruned_at=timezone.now())
    return Pruned(steps=[number for number, _ in steps], transcripts=transcripts, renders=renders,
                  search_entries=entries)
