"""Reads of training runs: the list of runs, a run's steps with their stored figures, and
the measures the run page, its table, its CSV and the compare page show.

Every figure is read as stored by the figures' worker (webapp.runs.figures); nothing here
computes one. Figures carry the grader's rankings, so they are read only through
`run_figures`, which takes the viewer: one from whom any step's rankings are hidden gets
RankingsHidden for the whole run. `run_steps` lists the steps without their figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson
from django.db import connection
from django.db.models import Count, Max, Q, Sum

from grading.rankings import FLAGS
from webapp.models import Batch, BatchFigures, Grading, Run, RunStep
from webapp.rankings import Viewer
from webapp.runs.figures import LENGTHS

ACTIVE = (Grading.Status.QUEUED, Grading.Status.RUNNING)
CONFIG_FIELDS = ("schedule", "params", "norm_by_std", "unbiased_std", "w_flag", "flag_names")  # as the config form


@dataclass(frozen=True)
class Line:
    """One series of a chart: its key (its column in the table and CSV), its label, where its
    value lies in a step's measures, and the batch page's filter behind a point."""

    key: str
    label: str
    path: tuple[str, ...]
    drill: str = ""

    def value(self, step: StepFigures) -> float | None:
        return step.series.get(self.key)


@dataclass(frozen=True)
class Measure:
    key: str
    title: str
    desc: str
    lines: tuple[Line, ...]
    low: float | None = None  # the y axis's fixed ends; None: from the data
    high: float | None = None
    unit: str = ""


@dataclass
class StepFigures:
    number: int
    batch_id: int
    batch_name: str
    trajectories: int
    series: dict  # each line's value by key ({} until first computed)
    config: dict | None  # the step's advantage config
    computed: bool
    updating: bool  # a recompute is due: these are the previous figures
    error: str
    trainer_wait: float | None  # seconds, for an online step the trainer read
    pruned: bool
    measures: dict | None = None  # read only when asked for (the API)


@dataclass
class RunFigures:
    run: Run
    steps: list[StepFigures]
    measures: list[Measure] = field(default_factory=list)

    @property
    def updating(self) -> int:
        return sum(step.updating for step in self.steps)

    @property
    def failed(self) -> list[StepFigures]:
        return [step for step in self.steps if step.error]

    @property
    def config_changes(self) -> list[tuple[int, str]]:
        """(step, what changed) where a step's advantage config differs from the step before's."""
        out, before = [], None
        for step in self.steps:
            config = step.config
            if config is None:
                continue
            if before is not None and config != before:
                keys = [*CONFIG_FIELDS, *sorted(set(config) | set(before) - set(CONFIG_FIELDS))]
                changed = ", ".join(f"{key} {before.get(key)!r} → {config.get(key)!r}"
                                    for key in keys if config.get(key) != before.get(key))
                out.append((step.number, f"advantage config changed: {changed}"))
            before = config
        return out


# --- the measures ---------------------------------------------------------------------------

def _lengths(name: str, title: str) -> Measure:
    ranked = "label=mixed&graded=yes"
    return Measure(
        key=name, title=title, desc="per step: median and p90 of the passing trajectories' "
        "best-ranked third and worst-ranked third of each ranked group, of all passing ones, and of failing ones",
        lines=(
            Line(f"{name}_best_median", "best third, median", ("lengths", name, "best", "median"), ranked),
            Line(f"{name}_worst_median", "worst third, median", ("lengths", name, "worst", "median"), ranked),
            Line(f"{name}_best_p90", "best third, p90", ("lengths", name, "best", "p90"), ranked),
            Line(f"{name}_worst_p90", "worst third, p90", ("lengths", name, "worst", "p90"), ranked),
            Line(f"{name}_passing_median", "passing, median", ("lengths", name, "passing", "median")),
            Line(f"{name}_failing_median", "failing, median", ("lengths", name, "failing", "median")),
            Line(f"{name}_failing_p90", "failing, p90", ("lengths", name, "failing", "p90")),
        ), low=0.0)


def _grading_state(state: str) -> Line:
    drill = "label=mixed&graded=yes" if state in ("graded", "unusable", "timeout") else "label=mixed&graded=no"
    return Line(f"grading_{state}", state.replace("_", " "), ("grading", state), drill)


MEASURES = (
    Measure("pass_rate", "Pass rate", "per step: the share of trajectories the tests passed",
            (Line("pass_rate", "pass rate", ("pass_rate",), "label=mixed"),), low=0.0, high=1.0),
    Measure("groups", "Groups by label", "per step: the share of groups that are mixed (dynamic sampling's yield), "
            "all pass and all fail", (
                Line("mixed_share", "mixed", ("mixed_share",), "label=mixed"),
                Line("all_pass_share", "all pass", ("all_pass_share",), "label=all_pass"),
                Line("all_fail_share", "all fail", ("all_fail_share",), "label=all_fail")), low=0.0, high=1.0),
    Measure("grading", "Mixed groups by grading state", "per step: mixed groups graded, pending, fallen back (failed, "
            "cancelled, a ranking that cannot apply, graded after the trainer had read the step) or never launched",
            tuple(_grading_state(state) for state in ("graded", "pending", "failed", "cancelled", "unusable",
                                                      "timeout", "not_launched")), low=0.0),
    Measure("mass_moved", "Advantage mass GAGAR moved", "per step: sum |A' - A| / sum |A| over passing trajectories",
            (Line("mass_moved", "mass moved", ("mass_moved",), "label=mixed&graded=yes"),), low=0.0),
    Measure("factors", "Spread of factors", "per step: p10, median and p90 of the schedule's factors of the ranked "
            "trajectories", (Line("factor_p10", "p10", ("factors", "p10"), "graded=yes"),
                             Line("factor_median", "median", ("factors", "median"), "graded=yes"),
                             Line("factor_p90", "p90", ("factors", "p90"), "graded=yes")), low=0.0),
    _lengths("lines", "Changed lines"),
    _lengths("num_turns", "Turns"),
    _lengths("output_tokens", "Output tokens"),
    Measure("flags", "Integrity flags", "per step: groups whose grader's top pick carries each flag",
            tuple(Line(f"flag_{name}", name.replace("_", " "), ("top_flags", name), f"top_flag={name}")
                  for name in FLAGS), low=0.0),
    Measure("review", "Human review", "per step: groups ranked by a human, human overrides of the grader's "
            "ranking, trajectories whose pass a human overrode (lucky passes), groups where a human disagrees", (
                Line("reviewed", "reviewed", ("reviewed",), "review=reviewed"),
                Line("overrides", "overrides", ("overrides",), "review=overridden"),
                Line("lucky_passes", "lucky passes", ("lucky_passes",), "review=overridden"),
                Line("disagreements", "disagreements", ("disagreements",), "agreement=disagrees")), low=0.0),
    Measure("agreement", "Grader–human agreement", "per step: the mean over reviewed groups of the lowest "
            "Kendall tau-b between an annotator and the grader",
            (Line("agreement", "Kendall tau-b", ("agreement",), "agreement=disagrees"),), low=-1.0, high=1.0),
    Measure("latency", "Grader latency", "per step: seconds from a grading run's launch to each result (p50, p95) "
            "and to the last; for an online step, how long the trainer waited for its rewards", (
                Line("latency_p50", "p50", ("latency", "p50"), "label=mixed"),
                Line("latency_p95", "p95", ("latency", "p95"), "label=mixed"),
                Line("latency_last", "last result", ("latency", "last"), "label=mixed"),
                Line("trainer_wait", "trainer waited", ())), low=0.0, unit="s"),
)
COUNTS = ("grading", "flags", "review")
TABLE_LINES = (Line("trajectories", "trajectories", ()), Line("groups", "groups", ("groups",))) + tuple(
    line for m in MEASURES for line in m.lines)


def series_row(measures: dict) -> dict:
    """Each line's value in `measures`, by key, flat, and the step's advantage config: stored
    beside them, so that the run page reads a few numbers, not nested figures (the step's
    trajectories and trainer wait come from its rows)."""
    out = {"config": measures.get("config")}
    for line in TABLE_LINES:
        if not line.path:
            continue
        value = measures
        for key in line.path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            out[line.key] = value
    return out


def shown_measures(steps: Iterable[StepFigures]) -> list[Measure]:
    """The measures with data in some step, each with only its lines that have some: no chart
    of turns for rollouts without metrics, no line for a flag no step carries."""
    present: dict[str, bool] = {}  # line key -> some step has a value; True: a value other than 0
    for step in steps:
        for key, value in step.series.items():
            present[key] = present.get(key, False) or bool(value)
    out = []
    for measure in MEASURES:
        lines = tuple(line for line in measure.lines if line.key in present)
        if measure.key in LENGTHS and f"{measure.key}_passing_median" not in present:
            lines = ()
        if measure.key in COUNTS:  # a count that is 0 at every step is left out (the first line stays)
            lines = tuple(line for i, line in enumerate(lines)
                          if (i == 0 and measure.key != "flags") or present[line.key])
        if lines:
            out.append(Measure(measure.key, measure.title, measure.desc, lines, measure.low, measure.high,
                               measure.unit))
    return out


# --- runs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSummary:
    run: Run
    steps: int
    latest: int | None
    trajectories: int
    groups: int
    # "grading" while a grading of a step is queued or running, "updating" while figures are due, else "ready"
    state: str


def runs_overview(runs=None) -> list[RunSummary]:
    """Every run (or those of `runs`) with its steps, latest step, trajectories and state."""
    runs = list(Run.objects.all() if runs is None else runs)
    ids = [run.pk for run in runs]
    totals = {row["run_id"]: row for row in RunStep.objects.filter(run_id__in=ids).order_by().values("run_id").annotate(
        steps=Count("pk"), latest=Max("number"), trajectories=Sum("batch__n_trajectories"),
        groups=Sum("batch__n_groups"))}
    grading = set(Grading.objects.filter(run__batch__run_step__run_id__in=ids, status__in=ACTIVE).order_by()
                  .values_list("run__batch__run_step__run_id", flat=True).distinct())
    updating = set(BatchFigures.objects.filter(batch__run_step__run_id__in=ids).filter(
        Q(requested_at__isnull=False) | Q(computed_at=None)).order_by()
        .values_list("batch__run_step__run_id", flat=True).distinct())
    out = []
    for run in runs:
        row = totals.get(run.pk, {})
        state = "grading" if run.pk in grading else "updating" if run.pk in updating else "ready"
        out.append(RunSummary(run=run, steps=row.get("steps", 0), latest=row.get("latest"),
                              trajectories=row.get("trajectories") or 0, groups=row.get("groups") or 0, state=state))
    return out


def run_steps(run: Run) -> list[StepFigures]:
    """The steps of `run` in order without their figures (`series` holds the step's trajectories
    and trainer wait only, no `config` or `error`), for any reader of the run: `run_figures`
    reads them with their figures, for a viewer who may see them."""
    return _steps(run, figures=False, measures=False)


def _steps(run: Run, *, figures: bool, measures: bool) -> list[StepFigures]:
    """The steps of `run` in order, with their stored figures if `figures` (`measures` too when
    asked). One plain query: at a thousand steps the ORM's per-row work was most of the run
    page's time."""
    step, batch, stored = (model._meta.db_table for model in (RunStep, Batch, BatchFigures))
    shown = "f.series, f.error" if figures else "NULL, ''"
    more = ", f.measures" if measures else ""
    sql = (f"SELECT s.number, s.batch_id, b.name, b.n_trajectories, s.created_at, s.answered_at, s.pruned_at, "
           f"{shown}, f.requested_at, f.computed_at{more} FROM {step} s JOIN {batch} b ON b.id = s.batch_id "
           f"LEFT JOIN {stored} f ON f.batch_id = s.batch_id WHERE s.run_id = %s ORDER BY s.number")
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk])
        rows = cursor.fetchall()
    out = []
    for number, batch_id, name, n, created, answered, pruned, series, error, requested, computed, *rest in rows:
        created, answered, pruned, requested, computed = (_datetime(v) for v in (created, answered, pruned, requested,
                                                                                  computed))
        wait = (answered - created).total_seconds() if answered else None
        series = {**_json(series), "trajectories": n}
        if wait is not None:
            series["trainer_wait"] = wait
        out.append(StepFigures(
            number=number, batch_id=batch_id, batch_name=name, trajectories=n, series=series,
            config=series.pop("config", None), computed=computed is not None,
            updating=requested is not None or computed is None, error=error or "", trainer_wait=wait,
            pruned=pruned is not None, measures=_json(rest[0]) or None if rest else None))
    return out


def _json(value):
    """A JSON column as read by a plain query: decoded by PostgreSQL's driver, text on SQLite."""
    if value is None:
        return {}
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _datetime(value):
    """A datetime column as read by a plain query: aware on PostgreSQL, text on SQLite."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value


def require_run(run: Run, *, viewer: Viewer) -> None:
    """RankingsHidden unless `viewer` may see every ranking of every step's batch."""
    viewer.require_all(Batch.objects.filter(run_step__run=run))


def run_figures(run: Run, *, viewer: Viewer, measures: bool = False) -> RunFigures:
    """The run's steps and the measures to chart; RankingsHidden unless `viewer` may see every
    ranking of every step's batch."""
    require_run(run, viewer=viewer)
    steps = _steps(run, figures=True, measures=measures)
    return RunFigures(run=run, steps=steps, measures=shown_measures(steps))


def run_watermark(run: Run) -> tuple:
    """What the run page's figures are read from, in a few numbers: its steps, and when any of
    their figures, waits or prunings last changed. Equal watermarks, equal pages."""
    row = RunStep.objects.filter(run=run).aggregate(
        steps=Count("pk"), last=Max("number"), computed=Max("batch__figures__computed_at"),
        requested=Count("batch__figures__requested_at"),
        missing=Count("pk", filter=Q(batch__figures__computed_at=None)),
        failed=Count("pk", filter=~Q(batch__figures__error="")), answered=Max("answered_at"),
        pruned=Count("pruned_at"))
    return (run.pk, run.name, *(str(row[key]) for key in sorted(row)))


def runs_by_ids(ids: Iterable[int]) -> list[Run]:
    """The runs of `ids` that exist, in the order given, each once."""
    ids = list(dict.fromkeys(ids))
    found = Run.objects.in_bulk(ids)
    return [found[pk] for pk in ids if pk in found]


@dataclass(frozen=True)
class Difference:
    line: Line
    measure: Measure
    means: list[float | None]  # per run, over the steps every run has
    differences: list[float | None]  # each run's mean less the first run's


def compare(runs: list[RunFigures]) -> tuple[list[int], list[Difference]]:
    """The steps every run has, and per line the mean of each run over them and its difference
    from the first run's."""
    common = sorted(set.intersection(*(set(step.number for step in r.steps) for r in runs))) if runs else []
    keep = set(common)
    out = []
    for measure in shown_measures(step for r in runs for step in r.steps):
        for line in measure.lines:
            means = []
            for r in runs:
                values = [v for step in r.steps if step.number in keep and (v := step.series.get(line.key)) is not None]
                means.append(sum(values) / len(values) if values else None)
            first = means[0] if means else None
            out.append(Difference(line=line, measure=measure, means=means, differences=[
                None if m is None or first is None else m - first for m in means]))
    return common, out
