"""The grading panel's figures of one batch: what the batch page's grading panel shows.

Computed by a worker after each change of the batch (webapp/derived.py `batch_figures_stale`, the
kind `derived.GRADING_PANEL`: `PanelFigures` reduces the batch's advantages in the pass that
computes its run page's figures too, webapp.grading.services.PANEL) and stored (`GradingPanel`);
the panel only reads them (webapp.grading.selectors). Over the whole batch, the grader's
rankings included: computed UNRESTRICTED, and shown only to a viewer who may see every ranking
of the batch (`Viewer.require_whole`).

- `histogram`: the mixed groups' advantages before and after redistribution;
- `flagged`: the ranked trajectories carrying a flag the config caps (the first FLAGGED_SHOWN
  as rows, `more`, and `n` in all);
- `grading`: the progress as it stood (mixed groups, those with a finished grading, the latest
  runs' counts per status and first failures), which the panel reads while nothing is queued
  or running.
"""

from __future__ import annotations

import dataclasses
import math

from django.db.models import Count

from webapp.advantages.chunks import AdvantageChunk, MixedAdvantages
from webapp.advantages.config import AdvantageConfig
from webapp.models import Batch, Grading, GradingRun, Group

RUNS_SHOWN, FAILURES_SHOWN = 5, 50  # the panel's latest runs, and failures listed per run
FLAGGED_SHOWN = 10


class PanelFigures:
    """The batch's grading panel figures, as the module's docstring says, reduced from the
    batch's advantage chunks a chunk at a time (`derived.Reducer`)."""

    def __init__(self, batch: Batch, config: AdvantageConfig) -> None:
        self.batch = batch
        self.capped = _Capped(config.flag_names)
        self.mixed_advantages = MixedAdvantages()

    def add(self, chunk: AdvantageChunk) -> None:
        self.capped.add(chunk)
        self.mixed_advantages.add(chunk)

    def fields(self) -> dict:
        mixed = Group.objects.filter(batch=self.batch, label=Group.Label.MIXED).count()
        capped = self.capped
        return {"figures": {
            "histogram": dataclasses.asdict(self.mixed_advantages.histogram()),
            "flagged": {"rows": capped.rows, "more": max(capped.n - FLAGGED_SHOWN, 0), "n": capped.n},
            "grading": grading_progress(self.batch, mixed=mixed)}}


def grading_progress(batch: Batch, *, mixed: int, runs: int = RUNS_SHOWN, failures: int = FAILURES_SHOWN) -> dict:
    """The grading panel's progress: mixed groups, those with a finished grading, and the
    latest `runs` runs' gradings per status with their first `failures` failures."""
    latest = list(GradingRun.objects.filter(batch=batch).order_by("-created_at", "-pk").values_list("pk", flat=True)
                  [:runs])
    counts = {pk: dict.fromkeys(Grading.Status.values, 0) for pk in latest}
    for run_pk, status, n in (Grading.objects.filter(run_id__in=latest).values("run_id", "status")
                              .annotate(n=Count("id")).values_list("run_id", "status", "n")):
        counts[run_pk][status] = n
    return {"mixed": mixed, "graded": Grading.objects.filter(group__batch=batch, status=Grading.Status.DONE)
            .values("group_id").distinct().count(),
            "runs": [{"id": pk, "counts": counts[pk], "failures": list(
                Grading.objects.filter(run_id=pk, status=Grading.Status.FAILED).order_by("group__group_id")
                .values("pk", "group_id", "group__group_id", "error", "attempts")[:failures])} for pk in latest]}


class _Capped:
    """The ranked trajectories carrying a flag the config caps, counted a chunk at a time."""

    def __init__(self, names) -> None:
        self.names = set(names)
        self.rows: list[dict] = []  # the first FLAGGED_SHOWN
        self.n = 0

    def add(self, chunk: AdvantageChunk) -> None:
        for i, names in chunk.flags.items():
            if chunk.rank[i] and self.names.intersection(names):
                self.n += 1
                if len(self.rows) < FLAGGED_SHOWN:
                    self.rows.append(_capped_row(chunk, i))


def _capped_row(chunk: AdvantageChunk, i: int) -> dict:
    g = int(chunk.group_index[i])
    factor = float(chunk.factor[i])
    return {"group_id": chunk.group_ids[g], "trajectory_id": chunk.trajectory_ids[i],
            "flags": list(chunk.flags[i]), "rank": int(chunk.rank[i]),
            "factor": None if math.isnan(factor) else factor, "grpo_advantage": float(chunk.grpo_advantage[i]),
            "advantage": float(chunk.advantage[i]), "source": chunk.source[g], "source_reason": chunk.source_reason[g]}
