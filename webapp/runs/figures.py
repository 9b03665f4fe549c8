"""The figures of one batch, a run's step: what the run page charts.

Computed by a worker after each change of the batch (webapp/derived.py `batch_figures_stale`, the
kind `derived.RUN_FIGURES`: `RunFigures` reduces the batch's advantages in the pass that computes
its grading panel's figures too) and stored (`BatchFigures`); pages only read them. Every figure is
over the whole batch, the grader's rankings included: computed UNRESTRICTED, and shown only to
a viewer who may see every ranking of the batch (`Viewer.require_whole`).

`measures` (per step, JSON):
- `trajectories`, `passed`, `pass_rate`: the tests' verdicts; `groups` and `labels` (groups per
  label), `mixed_share`, `all_pass_share`, `all_fail_share` of the groups.
- `grading`: the mixed groups by state: graded, pending (a grading queued or running),
  failed, cancelled, unusable (a ranking that cannot apply: the advantages fell back to
  GRPO's), timeout (graded after the trainer had read the step's rewards: it fell back for
  the trainer), not_launched.
- `mass_moved`: sum |A' - A| / sum |A| over passing trajectories (A: GRPO's advantage, A':
  GAGAR's), None where no trajectory was ranked (an ungraded step: a gap, not "0 moved");
  `factors`: p10, median, p90 of the schedule's factors of the ranked trajectories.
- `lengths`: per measure (`lines`: changed lines of the patch, as grading.evaluation counts
  them; `num_turns` and `output_tokens` where the rollouts carry those metrics), median, p90
  and n of passing trajectories (`passing`), of the best-ranked third (`best`: rank <=
  ceil(k/3) among a group's k ranked trajectories, k >= 2) and the worst-ranked third
  (`worst`: rank > k - ceil(k/3)), and of failing ones (`failing`).
- `top_flags`: groups whose grader's top pick carries each flag; `flagged`: trajectories
  carrying each flag in their final ranking.
- `overrides`: groups whose final ranking is a human's; `lucky_passes`: trajectories the tests
  passed and a human's ranking failed; `reviewed`: groups some human ranked; `agreement`:
  the mean of each group's lowest Kendall tau-b, annotator vs grader, and `agreement_n`;
  `disagreements`: groups where a human names another best tier than the grader.
- `latency`: seconds from a grading run's launch to each finished grading: p50, p95, and
  `last` (launch to the last result).
- `config`: the batch's advantage config.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
from django.db import connection

from grading.rankings import FLAGS
from webapp import derived
from webapp.advantages.chunks import MISSING_SCORES, RANKING_MISMATCH, AdvantageChunk
from webapp.advantages.config import AdvantageConfig
from webapp.models import Batch, Grading, Group, RunStep, Trajectory
from webapp.triage import DISPUTED, REVIEWED, flag_names

LENGTHS = ("lines", "num_turns", "output_tokens")
PARTS = ("passing", "best", "worst", "failing")
GRADING_STATES = ("graded", "pending", "failed", "cancelled", "unusable", "timeout", "not_launched")


class BatchChanged(derived.DataChanged):
    """An import added to the batch between two of the reads its figures are made of: that
    import requested them again, so they are computed again, not stored."""


def trajectory_columns(batch_id: int) -> dict[str, np.ndarray]:
    """Per trajectory of the batch, in the order `advantage_chunks` gives them (groups by group
    id, then trajectory id, in code point order): the tests' verdict, the patch's changed lines
    and the `num_turns` and `output_tokens` metrics (NaN where absent). Counted in the database
    as grading.evaluation.changed_lines counts them (lines that start with + or -, but not the
    +++ and --- file headers): the patches of a large batch never leave it, and one ordered
    query lines its rows up with the advantages' without a lookup per trajectory."""
    def starts(prefix: str) -> str:  # lines of x, a patch after a newline, that start with `prefix`
        return f"((LENGTH(x) - LENGTH(REPLACE(x, '{chr(10)}{prefix}', ''))) / {len(prefix) + 1})"

    lines = f"{starts('+')} + {starts('-')} - {starts('+++')} - {starts('---')}"
    trajectory, group = Trajectory._meta.db_table, Group._meta.db_table
    if connection.vendor == "postgresql":
        lines = lines.replace("LENGTH", "OCTET_LENGTH")  # the prefixes are ASCII: bytes count as characters do
        metric = "CASE WHEN jsonb_typeof(t.metrics->'{0}') = 'number' THEN (t.metrics->>'{0}')::float8 END"
        order = 'g.group_id COLLATE "C", CAST(t.trajectory_id AS TEXT) COLLATE "C"'
    else:
        metric = ("CASE WHEN json_type(t.metrics, '$.{0}') IN ('integer', 'real') "
                  "THEN json_extract(t.metrics, '$.{0}') END")
        order = "g.group_id, t.trajectory_id"
    sql = (f"SELECT t.passed, {lines}, {metric.format('num_turns')}, {metric.format('output_tokens')} "
           f"FROM (SELECT t.*, '{chr(10)}' || t.patch AS x FROM {trajectory} t WHERE t.batch_id = %s) t "
           f"JOIN {group} g ON g.id = t.group_id ORDER BY {order}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [batch_id])
        rows = cursor.fetchall()
    columns = np.array(rows, dtype=np.float64).reshape(-1, 4) if rows else np.zeros((0, 4))
    return {"tested": columns[:, 0] > 0, "lines": columns[:, 1], "num_turns": columns[:, 2],
            "output_tokens": columns[:, 3]}


def stats(values) -> dict:
    """Median, p90 (linear interpolation) and count of `values`; None for the first two when empty."""
    a = np.asarray(values, dtype=np.float64)
    if not a.size:
        return {"median": None, "p90": None, "n": 0}
    median, p90 = np.percentile(a, [50, 90])
    return {"median": float(median), "p90": float(p90), "n": int(a.size)}


class RunFigures:
    """The measures of the batch, as the module's docstring says, reduced from the batch's
    advantage chunks a chunk at a time (`add`), with `compute_s`: the seconds from its start to
    its `measures()`. The runs services make it a `derived.Reducer` (webapp.runs.services.StepFigures),
    adding each chart line's value flat beside the measures."""

    def __init__(self, batch: Batch, config: AdvantageConfig) -> None:
        self.begun = time.monotonic()
        self.batch, self.config = batch, config
        self.groups = {pk: row for pk, *row in Group.objects.filter(batch=batch).values_list(
            "pk", "group_id", "label", "grader_top_flags", "agreement", "human_disagrees", "review_state")}
        self.pk_of = {row[0]: pk for pk, row in self.groups.items()}
        self.columns = trajectory_columns(batch.pk)
        self.at = 0  # where the next chunk's trajectories start in `columns`
        self.lengths = {name: {part: [] for part in PARTS} for name in LENGTHS}
        self.moved = self.total = 0.0
        self.ranked_count = 0  # none: nothing was ranked, so no mass was moved or kept: no value, not 0
        self.factors: list[np.ndarray] = []
        self.flagged, self.lucky, self.human, self.unusable = Counter(), 0, set(), set()

    def add(self, chunk: AdvantageChunk) -> None:
        group_pks = [self.pk_of[g] for g in chunk.group_ids]
        for g, (version, reason) in enumerate(zip(chunk.ranking_version, chunk.source_reason, strict=True)):
            if version and version.startswith("annotation:"):
                self.human.add(group_pks[g])
            if reason in (RANKING_MISMATCH, MISSING_SCORES):
                self.unusable.add(group_pks[g])
        passed, ranked = chunk.passed, chunk.rank > 0
        self.ranked_count += int(ranked.sum())
        self.moved += float(np.abs(chunk.advantage[passed] - chunk.grpo_advantage[passed]).sum())
        self.total += float(np.abs(chunk.grpo_advantage[passed]).sum())
        self.factors.append(chunk.factor[ranked & ~np.isnan(chunk.factor)])
        k = np.bincount(chunk.group_index, weights=ranked, minlength=len(chunk.group_ids))[chunk.group_index]
        third = np.ceil(k / 3)
        best = ranked & (k >= 2) & (chunk.rank <= third)
        worst = ranked & (k >= 2) & (chunk.rank > k - third)
        here = slice(self.at, self.at + len(chunk))
        self.at += len(chunk)
        if self.at > len(self.columns["tested"]):
            raise BatchChanged(f"batch {self.batch.name!r} gained trajectories while its figures were computed")
        self.lucky += int((self.columns["tested"][here] & ~passed).sum())
        parts = {"passing": passed, "best": best, "worst": worst, "failing": ~passed}
        for name in LENGTHS:
            values = self.columns[name][here]
            known = ~np.isnan(values)
            for part, chosen in parts.items():
                self.lengths[name][part].append(values[chosen & known])
        for names in chunk.flags.values():
            self.flagged.update(names)

    def measures(self) -> dict:
        batch, groups = self.batch, self.groups
        if self.at != len(self.columns["tested"]):
            raise BatchChanged(f"batch {batch.name!r} changed while its figures were computed")
        labels = Counter(row[1] for row in groups.values())
        n_groups = len(groups)
        share = (lambda label: labels[label] / n_groups) if n_groups else (lambda label: None)
        agreements = [row[3] for row in groups.values() if row[3] is not None]
        all_factors = np.concatenate(self.factors) if self.factors else np.zeros(0)
        return {
            "trajectories": batch.n_trajectories, "passed": batch.n_passed,
            "pass_rate": batch.n_passed / batch.n_trajectories if batch.n_trajectories else None,
            "groups": n_groups, "labels": {label: labels[label] for label in Group.Label.values},
            "mixed_share": share("mixed"), "all_pass_share": share("all_pass"), "all_fail_share": share("all_fail"),
            "grading": grading_states(batch, groups, self.unusable),
            "mass_moved": self.moved / self.total if self.total and self.ranked_count else None,
            "factors": _percentiles(all_factors, (10, 50, 90), ("p10", "median", "p90")),
            "lengths": {name: {part: stats(np.concatenate(values) if values else ()) for part, values in parts.items()}
                        for name, parts in self.lengths.items()},
            "top_flags": _top_flags(groups),
            "flagged": {name: self.flagged[name] for name in FLAGS if self.flagged[name]},
            "overrides": len(self.human), "lucky_passes": self.lucky,
            "reviewed": sum(row[5] in (REVIEWED, DISPUTED) for row in groups.values()),
            "agreement": float(np.mean(agreements)) if agreements else None, "agreement_n": len(agreements),
            "disagreements": sum(bool(row[4]) for row in groups.values()),
            "latency": latency(batch),
            "config": self.config.as_dict(),
            "compute_s": round(time.monotonic() - self.begun, 4),
        }


def grading_states(batch: Batch, groups: dict, unusable: set[int]) -> dict[str, int]:
    """The mixed groups of `batch` by the state of their latest grading (GRADING_STATES)."""
    answered = RunStep.objects.filter(batch=batch).values_list("answered_at", flat=True).first()
    latest: dict[int, tuple[str, object]] = {}
    active = set()
    rows = (Grading.objects.filter(run__batch=batch).order_by("group_id", "-pk")
            .values_list("group_id", "status", "finished_at"))
    for group_pk, status, finished in rows:
        if status in (Grading.Status.QUEUED, Grading.Status.RUNNING):
            active.add(group_pk)
        latest.setdefault(group_pk, (status, finished))
    states = dict.fromkeys(GRADING_STATES, 0)
    for pk, row in groups.items():
        if row[1] != Group.Label.MIXED:
            continue
        status, finished = latest.get(pk, (None, None))
        if pk in active:
            state = "pending"
        elif status is None:
            state = "not_launched"
        elif status != Grading.Status.DONE:
            state = status  # failed or cancelled
        elif pk in unusable:
            state = "unusable"
        elif answered is not None and finished is not None and finished > answered:
            state = "timeout"
        else:
            state = "graded"
        states[state] += 1
    return states


def latency(batch: Batch) -> dict:
    """Seconds from each grading's launch (its run's creation) to its result: p50, p95, last."""
    rows = (Grading.objects.filter(run__batch=batch, status=Grading.Status.DONE)
            .values_list("run__created_at", "finished_at"))
    seconds = np.asarray([(finished - launched).total_seconds() for launched, finished in rows], dtype=np.float64)
    out = _percentiles(seconds, (50, 95), ("p50", "p95"))
    out["last"] = float(seconds.max()) if seconds.size else None
    return out


def _percentiles(values: np.ndarray, qs: tuple, names: tuple) -> dict:
    if not values.size:
        return dict.fromkeys(names)
    return {name: float(v) for name, v in zip(names, np.percentile(values, qs), strict=True)}


def _top_flags(groups: dict) -> dict[str, int]:
    counts = Counter(name for row in groups.values() for name in flag_names(row[2]))
    return {name: counts[name] for name in FLAGS if counts[name]}
