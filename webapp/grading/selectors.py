"""Reads of grading: the runs of a batch with their progress and failures, and the grading
panel's figures as its worker stored them (webapp.grading.figures, `GradingPanel`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, Max

from webapp import derived
from webapp.advantages.chunks import AdvantageHistogram
from webapp.models import Batch, Grading, GradingPanel, GradingRun, Group
from webapp.rankings import UNRESTRICTED, RankingsHidden, Viewer, final_rankings

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE,
                                            Grading.Status.FAILED, Grading.Status.CANCELLED)


@dataclass
class RunStatus:
    run: GradingRun
    counts: dict[str, int]
    failures: list[dict]  # empty for a viewer from whom the grader is hidden: errors quote its output
    grader_version: str  # "" for such a viewer

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def active(self) -> bool:
        return bool(self.counts[QUEUED] or self.counts[RUNNING])

    @property
    def cancelled(self) -> bool:
        return self.run.cancelled_at is not None

    @property
    def state(self) -> str:
        """What the run came to, at a glance: "running" while anything is queued or running
        ("cancelling" once cancelled, until its running gradings finish); then "cancelled",
        or "done" (every grading done), "failed" (none done) or "partial" (some failed)."""
        if self.active:
            return "cancelling" if self.cancelled else "running"
        if self.cancelled:
            return "cancelled"
        if not self.counts[FAILED]:
            return "done"
        return "partial" if self.counts[DONE] else "failed"

    @property
    def bar(self) -> list[dict]:
        """The progress bar's segments, done, failed, cancelled, then running, as x and width in 0..100."""
        out, x = [], 0.0
        for status in (DONE, FAILED, CANCELLED, RUNNING):
            width = 100 * self.counts[status] / self.total if self.total else 0.0
            out.append({"status": status, "x": round(x, 2), "width": round(width, 2)})
            x += width
        return out


def batch_grading_status(batch: Batch, *, viewer: Viewer, runs: int = 5, failures: int = 50) -> list[RunStatus]:
    """The latest `runs` grading runs of `batch`, newest first, with counts per status and
    up to `failures` failed groups each. A viewer from whom the batch's grader is hidden gets
    the progress only: no grader version, no errors. While nothing is queued or running and
    the batch's stored panel figures are current, their counts are read (counting a run of 100,000
    gradings on each visit took most of the panel's time); else they are counted."""
    hidden = viewer.on_listing(batch).grader
    latest = list(GradingRun.objects.filter(batch=batch).select_related("created_by", "cancelled_by")
                  .order_by("-created_at", "-pk")[:runs])
    stored = _stored_progress(batch)
    if stored is not None and [r["id"] for r in stored["runs"]][:runs] == [run.pk for run in latest]:
        counts = {r["id"]: r["counts"] for r in stored["runs"]}
        failed_of = {r["id"]: r["failures"][:failures] for r in stored["runs"]}
    else:
        counts = {run.pk: dict.fromkeys(Grading.Status.values, 0) for run in latest}
        for run_pk, status, n in (Grading.objects.filter(run__in=latest).values("run_id", "status")
                                  .annotate(n=Count("id")).values_list("run_id", "status", "n")):
            counts[run_pk][status] = n
        failed_of = {run.pk: list(Grading.objects.filter(run=run, status=FAILED).order_by("group__group_id")
                                  .values("pk", "group_id", "group__group_id", "error", "attempts")[:failures])
                     for run in latest if not hidden and counts[run.pk][FAILED]}
    return [RunStatus(run=run, counts=counts[run.pk], failures=[] if hidden else failed_of.get(run.pk, []),
                      grader_version="" if hidden else run.grader_version) for run in latest]


def _stored_progress(batch: Batch) -> dict | None:
    """The grading progress the batch's panel figures were computed with, if they are current
    (no write has requested them since) and nothing was queued or running then; else None."""
    row = GradingPanel.objects.filter(batch=batch, requested_at=None).exclude(computed_at=None).values_list(
        "figures__grading", flat=True).first()
    if not row or any(r["counts"][QUEUED] or r["counts"][RUNNING] for r in row["runs"]):
        return None
    return row


def wait_for(run_pks: Sequence[int], *, timeout: float | None = None, interval: float = 1.0,
             on_progress=None) -> dict[str, int]:
    """Block until no grading of `run_pks` is queued or running; return counts per status."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        counts = dict.fromkeys(Grading.Status.values, 0)
        for status, n in (Grading.objects.filter(run_id__in=run_pks).values("status")
                          .annotate(n=Count("id")).values_list("status", "n")):
            counts[status] = n
        if on_progress:
            on_progress(counts)
        if not (counts[QUEUED] or counts[RUNNING]):
            return counts
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"still {counts[QUEUED]} queued and {counts[RUNNING]} running")
        time.sleep(interval)


def in_progress(run: GradingRun) -> int:
    """How many gradings of `run` are queued or running."""
    return run.gradings.filter(status__in=(QUEUED, RUNNING)).count()


def graded_share(batch: Batch) -> dict[str, int]:
    """The batch's mixed groups, and how many of them have a finished grading: stored with its
    figures while those are current, else counted."""
    stored = _stored_progress(batch)
    if stored is not None:
        return {"mixed": stored["mixed"], "graded": stored["graded"]}
    return {
        "mixed": Group.objects.filter(batch=batch, label=Group.Label.MIXED).count(),
        "graded": Group.objects.filter(batch=batch, gradings__status=DONE).distinct().count(),
    }


@dataclass(frozen=True)
class Takeover:
    """What a finished run did to its batch's final rankings (a human's, else the latest grader's)."""

    final: int  # groups whose final ranking is now this run's
    replaced: dict[str, int]  # of those, how many had another run's final ranking before, by its grader
    kept_human: int  # groups this run graded whose final ranking stays a person's
    fell_back: int  # groups a hybrid grader ranked with its prior: the model's answer was unusable


def run_takeover(run: GradingRun) -> Takeover:
    """Which final rankings `run`'s gradings became: a later grading replaces an earlier one as a
    group's final ranking, whatever its grader, so a user must be told (for the command line,
    which sees everything)."""
    mine = dict(Grading.objects.filter(run=run, status=DONE).values_list("group_id", "pk"))
    finals = final_rankings(list(mine), viewer=UNRESTRICTED, lean=True)
    now_mine = [pk for pk, final in finals.items() if final.grading_id == mine[pk]]
    before = {}
    earlier = (Grading.objects.filter(group_id__in=now_mine, status=DONE).exclude(run=run)
               .order_by("group_id", "finished_at", "pk").values_list("group_id", "run__grader", "run_id"))
    for group_pk, grader, run_pk in earlier:
        before[group_pk] = grader if grader != run.grader else f"{grader} (run {run_pk})"
    return Takeover(final=len(now_mine), replaced=dict(Counter(before.values())),
                    kept_human=sum(final.source == "human" for final in finals.values()),
                    fell_back=Grading.objects.filter(run=run, status=DONE, usage__fallback=1).count())


@dataclass
class PanelFigures:
    """The grading panel's advantage figures as last stored: the histogram of the mixed groups'
    advantages before and after redistribution and the ranked trajectories carrying a flag the
    config caps (None until first computed); `updating` while a recompute is due; `hidden`
    says why the viewer may not see them ("" when they may)."""

    histogram: AdvantageHistogram | None = None
    flagged: dict | None = None
    updating: bool = False
    computed_at: object = None
    error: str = ""
    hidden: str = ""


def panel_figures(batch: Batch, *, viewer: Viewer) -> PanelFigures:
    """The batch's stored panel figures for `viewer`: every advantage of the batch carries its
    ranking, so a viewer from whom some are hidden gets none. A batch never computed (imported
    before figures were stored) has them requested now."""
    try:
        viewer.require_whole(batch)
    except RankingsHidden as error:
        return PanelFigures(hidden=str(error))
    stored = GradingPanel.objects.filter(batch=batch)
    row = stored.values_list("figures", "requested_at", "computed_at", "error").first()
    if row is None:
        derived.mark_requested(derived.GRADING_PANEL, stored, key=batch.pk, new=[GradingPanel(batch=batch)])
        return PanelFigures(updating=True)
    panel, requested, computed, error = row
    histogram = None
    if panel and panel["histogram"]["n"]:
        histogram = AdvantageHistogram(**panel["histogram"])
    return PanelFigures(histogram=histogram, flagged=panel["flagged"] if panel else None,
                        updating=requested is not None or computed is None, computed_at=computed, error=error)


def grading_watermarks(batch: Batch | None) -> dict[str, tuple[str, int]]:
    """Per grader version, its gradings' latest finish and their count, over `batch` (None:
    every batch): what figures computed from the gradings are keyed by (the audit dashboard's)."""
    rows = Grading.objects.all() if batch is None else Grading.objects.filter(run__batch=batch)
    return {version: (str(latest), n) for version, latest, n in
            rows.values("run__grader_version").annotate(latest=Max("finished_at"), n=Count("pk")).order_by()
            .values_list("run__grader_version", "latest", "n")}
