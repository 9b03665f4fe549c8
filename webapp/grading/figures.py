"""The grading panel's figures of one batch: what the batch page's grading panel shows.

Computed by a worker after each change of the batch (webapp/work.py `batch_figures_stale`, the
kind `work.GRADING_PANEL`, webapp.grading.services.panel_refresh) and stored (`GradingPanel`);
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

import math

import numpy as np
from django.db.models import Count

from webapp.advantages.chunks import advantage_histogram
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.selectors import advantage_chunks
from webapp.models import Batch, Grading, GradingRun, Group
from webapp.rankings import UNRESTRICTED

RUNS_SHOWN, FAILURES_SHOWN = 5, 50  # the panel's latest runs, and failures listed per run
FLAGGED_SHOWN = 10


def batch_panel(batch_id: int) -> dict:
    """The batch's grading panel figures, as the module's docstring says."""
    batch = Batch.objects.get(pk=batch_id)
    config = parse_advantage_config(batch.advantage_config)
    cap_names = set(config.flag_names)
    mixed_before, mixed_after = [], []
    capped_rows, capped = [], 0
    for chunk in advantage_chunks(batch, viewer=UNRESTRICTED, config=config):
        mixed = np.asarray([label == "mixed" for label in chunk.label])[chunk.group_index]
        mixed_before.append(chunk.grpo_advantage[mixed])
        mixed_after.append(chunk.advantage[mixed])
        for i, names in chunk.flags.items():
            if chunk.rank[i] and cap_names.intersection(names):
                capped += 1
                if len(capped_rows) < FLAGGED_SHOWN:
                    capped_rows.append(_capped_row(chunk, i))
    mixed = Group.objects.filter(batch=batch, label=Group.Label.MIXED).count()
    return {"histogram": _histogram(mixed_before, mixed_after),
            "flagged": {"rows": capped_rows, "more": max(capped - FLAGGED_SHOWN, 0), "n": capped},
            "grading": grading_progress(batch, mixed=mixed)}


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


def _capped_row(chunk, i: int) -> dict:
    g = int(chunk.group_index[i])
    factor = float(chunk.factor[i])
    return {"group_id": chunk.group_ids[g], "trajectory_id": chunk.trajectory_ids[i],
            "flags": list(chunk.flags[i]), "rank": int(chunk.rank[i]),
            "factor": None if math.isnan(factor) else factor, "grpo_advantage": float(chunk.grpo_advantage[i]),
            "advantage": float(chunk.advantage[i]), "source": chunk.source[g], "source_reason": chunk.source_reason[g]}


def _histogram(before: list[np.ndarray], after: list[np.ndarray]) -> dict:
    before_all = np.concatenate(before) if before else np.zeros(0)
    after_all = np.concatenate(after) if after else np.zeros(0)
    rows = [{"label": "mixed", "grpo_advantage": b, "advantage": a}
            for b, a in zip(before_all.tolist(), after_all.tolist(), strict=True)]
    histogram = advantage_histogram(rows)
    return {"edges": histogram.edges, "before": histogram.before, "after": histogram.after, "n": histogram.n}
