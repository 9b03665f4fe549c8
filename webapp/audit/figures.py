"""Every figure of the audit dashboard, per grader version, from the database: one selector
module that the dashboard pages, their CSV downloads and the audit report read.

A grader version is a `GradingRun.grader_version` (every grading of a run shares it; a run
with no finished grading has none yet and is not counted). Versions are ordered by their
first run. Per version, over the groups of the selection (one batch, or all):

- correctness, the primary measure: against people's verdicts (the passing trajectories a
  person marked not truly passing, auditors' corrected rankings), by `evaluate_grader`'s
  functions, on the version's latest finished grading of each such group
  (webapp.audit.correctness);
- agreement with humans: each group whose final ranking is a human one, against the
  version's latest finished grading of it (`grading.agreement.summarise`: means with
  bootstrap intervals over groups);
- proxy agreement: against "closest to the human fix" where the task has a reference
  patch (`grading.evaluation`; a proxy, labelled so: a diagnostic, not a target);
- verdicts and error categories: the share of auditors' verdicts on the version's audited
  gradings, with Wilson score intervals (closed form, exact coverage for a proportion
  near 0 or 1 better than the normal one);
- failure rate: failed gradings / finished (done or failed) ones, Wilson interval;
- cost: tokens and seconds per graded group (mean, p50, p95);
- position bias: `rank_correlation_with` the order the grader was shown the trajectories
  in, their patch length (characters) and their turn count;
- advantages: the distribution of the schedule's factors and of the shift GAGAR makes
  (redistributed advantage − GRPO advantage) under the version's rankings.

And per selection, whatever the versions: the annotators' concordance where they ranked groups
independently (webapp.audit.concordance), and the gold set's drift.

The figures cost up to seconds over 10,000 groups (bootstrap intervals), so they are stored
in parts (webapp.audit.refresh: the table AuditFigures, shared by every web process), each
with the watermark of the data it depends on: per version, its correctness (that version's
gradings; the latest annotation; the verdicts' count and latest change; the latest
trajectory), its agreement with people (that
version's gradings: latest finish and count; the latest annotation), its figures from
gradings and trajectories (that version's gradings; the latest trajectory) and its verdict
rates (the verdicts' count and latest change); the annotators' concordance (the latest
annotation); the gold set's drift (every version's gradings, the gold set's size and latest
mark). The dashboard shows the stored parts: a stale one (its watermark is not the data's)
as it is, marked "updating", while a worker recomputes it
(webapp.audit.services.figures_refresh); the verdict rates, cheap, are computed in the
request; `progress` says where the others stand, for the page to show them once they are
ready. `ranking_figures`, `correctness_figures`, `verdict_figures`, `annotator_concordance`
and `gold_drift` (the report, the worker) return current figures, computing and storing the
stale parts. The figures carry the grader's rankings and people's, over every group of the
selection: `dashboard` and `progress` take the viewer and show them only to one who may see
every ranking there (`require_selection`), as the report does.
webapp.audit.ranking and webapp.audit.correctness compute them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime

from django.db import connection
from django.db.models import Count, Max, Min, OuterRef, Subquery

from grading.agreement import AgreementSummary, Estimate
from grading.rates import Rate, wilson
from webapp.audit import refresh
from webapp.audit.concordance import Concordance, concordance
from webapp.audit.correctness import Correctness, correctness
from webapp.audit.ranking import (
    Cost,
    GradingFigures,
    Histogram,
    Proxy,
    agreement_summary,
    agreements,
    grading_figures,
)
from webapp.grading.selectors import grading_watermarks
from webapp.models import Annotation, AuditVerdict, Batch, GoldGroup, Grading, GradingRun, Trajectory
from webapp.rankings import Viewer

DONE = Grading.Status.DONE
MEASURES = (("kendall_tau", "Kendall tau-b"), ("pairwise_accuracy", "pairwise accuracy"), ("top1", "top-1"),
            ("spearman", "Spearman rho"))
DRIFT_MEASURES = MEASURES[:3]
DRIFT = "the gold set's drift"
CONCORDANCE = "the annotators' concordance"
SHARED = {"drift": DRIFT, "concordance": CONCORDANCE}  # the parts of a selection, not of a version, by name
VERSION_PARTS = ("correctness", "agreement", "gradings")  # the costly parts of a version


@dataclass(frozen=True)
class Version:
    version: str
    grader: str  # the grader of its first run (a profile name or module:Class)
    first_run_at: datetime


@dataclass(frozen=True)
class RankingFigures:
    """What a version's gradings say, against humans, the proxy and the data; cached."""

    version: str
    graded: int  # groups with a finished grading by it
    agreement: AgreementSummary
    proxy: Proxy
    failure: Rate
    cost: Cost
    bias: dict[str, Estimate]  # by COVARIATES key
    factors: Histogram
    shifts: Histogram


@dataclass(frozen=True)
class VerdictFigures:
    verdicts: list[Rate]  # by AuditVerdict.Verdict
    categories: list[Rate]  # share of verdicts naming each category


@dataclass(frozen=True)
class DriftPoint:
    version: Version
    agreement: AgreementSummary


@dataclass(frozen=True)
class DriftWarning:
    version: str
    previous: str
    measure: str  # a DRIFT_MEASURES label
    value: float
    interval: tuple[float, float]
    previous_value: float


@dataclass(frozen=True)
class Drift:
    gold_groups: int
    points: list[DriftPoint]
    warnings: list[DriftWarning]


@dataclass(frozen=True)
class VersionDashboard:
    version: Version
    correctness: Correctness
    ranking: RankingFigures
    verdicts: VerdictFigures


@dataclass(frozen=True)
class Progress:
    """Where the stored parts of a selection's figures stand (see `dashboard`)."""

    updating: datetime | None = None  # the oldest stale part shown was computed then
    computing: list[str] = field(default_factory=list)  # versions (and SHARED parts) not computed yet
    failed: list[tuple[str, str]] = field(default_factory=list)  # (version or SHARED name, why) whose recompute failed

    @property
    def pending(self) -> bool:
        """Whether a worker has figures to bring the page: stale or never computed ones."""
        return self.updating is not None or bool(self.computing)


@dataclass(frozen=True)
class Dashboard:
    batch: Batch | None
    versions: list[VersionDashboard] = field(default_factory=list)  # those with figures stored
    drift: Drift | None = None  # None: never computed yet
    concordance: Concordance | None = None  # None: never computed yet
    updating: datetime | None = None  # as Progress
    computing: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Watermarks:
    """What changes whenever a cached figure would (see the module's docstring)."""

    gradings: dict[str, tuple]  # by version: its gradings' latest finish and count
    annotations: str
    trajectories: str
    gold: tuple
    verdicts: tuple


# --- entry points ------------------------------------------------------------------------

def grader_versions(batch: Batch | None) -> list[Version]:
    """The versions that graded something in `batch` (None: anywhere), by their first run."""
    runs = GradingRun.objects.exclude(grader_version="")
    if batch is not None:
        runs = runs.filter(batch=batch)
    rows = (runs.values("grader_version").annotate(first=Min("created_at"), grader=Min("grader"))
            .order_by("first", "grader_version").values_list("grader_version", "grader", "first"))
    return [Version(version, grader, first) for version, grader, first in rows]


def require_selection(batch: Batch | None, *, viewer: Viewer) -> None:
    """RankingsHidden unless `viewer` may see every ranking of `batch` (None: of every batch)."""
    viewer.require_all(Batch.objects.all() if batch is None else Batch.objects.filter(pk=batch.pk))


def dashboard(batch: Batch | None, versions: list[Version], *, all_versions: list[Version],
              viewer: Viewer) -> Dashboard:
    """The stored figures of the selected `versions` over `batch` (None: every batch), and the
    annotators' concordance and the gold set's drift over `all_versions` (the batch's, in time
    order), without computing the costly ones: a stale part is shown and `updating` says since
    when, a part never computed is not (`computing`); both are queued for the worker. A part
    whose recompute failed on the data as it is now is not queued again: `failed` says why.
    The verdict rates, cheap, are brought up to date here. RankingsHidden unless `viewer` may
    see every ranking of the selection."""
    require_selection(batch, viewer=viewer)
    names = [v.version for v in versions]
    marks = watermarks(batch)  # read once for every part
    found, shown, progress = _stored(batch, versions, all_versions, marks,
                                     also=[_key("verdicts", batch, v) for v in names])
    verdicts = _current(batch, "verdicts", names, marks, _verdicts, found=found)
    shown = {(kind, version): refresh.decode(PAYLOADS[kind], payload) for (kind, version), payload in shown.items()}
    ready = [v for v in versions if all((kind, v.version) in shown for kind in VERSION_PARTS)]
    return Dashboard(
        batch=batch,
        versions=[VersionDashboard(v, shown["correctness", v.version],
                                   _ranking(v.version, shown["agreement", v.version], shown["gradings", v.version]),
                                   verdicts[v.version]) for v in ready],
        drift=shown.get(("drift", "")) if all_versions else Drift(0, [], []),
        concordance=shown.get(("concordance", "")) if all_versions else Concordance([]),
        updating=progress.updating, computing=progress.computing, failed=progress.failed)


def progress(batch: Batch | None, versions: list[Version], *, all_versions: list[Version],
             viewer: Viewer) -> Progress:
    """Where the parts `dashboard` shows stand, without reading their figures; queues those
    stale or missing as it does. RankingsHidden as `dashboard`."""
    require_selection(batch, viewer=viewer)
    return _stored(batch, versions, all_versions, watermarks(batch))[2]


def _stored(batch: Batch | None, versions: list[Version], all_versions: list[Version], marks: Watermarks, *,
            also: Sequence[str] = ()) -> tuple[dict, dict, Progress]:
    """The stored rows of the costly parts of the selection (and the keys `also`), by key; the
    payloads of those that hold figures, by (kind, version); and where they stand. Queues a
    recompute of each stale or missing part not queued yet."""
    names = [v.version for v in versions]
    drift_names = sorted(v.version for v in all_versions)
    parts = [(kind, v) for v in names for kind in VERSION_PARTS] + (
        [(kind, "") for kind in SHARED] if all_versions else [])
    found = refresh.read([_key(kind, batch, version) for kind, version in parts] + list(also))
    shown, stale_since, queue, failed = {}, [], [], {}
    for kind, version in parts:
        row = found.get(_key(kind, batch, version))
        current = row is not None and row.watermark == refresh.watermark(_mark(kind, version, marks, drift_names))
        if row is not None and (reason := refresh.failure(row.payload)) is not None:
            failed.setdefault(version or SHARED[kind], reason)
            if current:
                continue  # failed on this very data: asked for again once it changes
        elif row is not None and row.payload is not None:
            shown[kind, version] = row.payload
            if current:
                continue
            stale_since.append(row.computed_at)
        if row is None or row.requested_at is None:  # else queued already
            queue.append((kind, batch.pk if batch else None, version))
    if queue:
        refresh.request(queue, stored=set(found))
    ready = {v for v in names if all((kind, v) in shown for kind in VERSION_PARTS)}
    computing = [v for v in names if v not in ready and v not in failed] + [
        name for kind, name in SHARED.items()
        if all_versions and (kind, "") not in shown and name not in failed]
    return found, shown, Progress(min(stale_since, default=None), computing, sorted(failed.items()))


def record_failure(batch: Batch | None, parts: list[tuple[str, str]], error: BaseException) -> None:
    """Store that computing `parts` ((kind, version)) over `batch` failed with `error`, under
    the watermark of the data now (webapp.audit.refresh); a part stored current before the
    failure keeps its figures."""
    marks = watermarks(batch)
    drift_names = sorted(v.version for v in grader_versions(batch)) if any(k == "drift" for k, _ in parts) else []
    current = {(kind, version): refresh.watermark(_mark(kind, version, marks, drift_names)) for kind, version in parts}
    found = refresh.read([_key(kind, batch, version) for kind, version in parts])
    failed = {}
    for (kind, version), mark in current.items():
        row = found.get(_key(kind, batch, version))
        if row is None or row.watermark != mark or row.payload is None or refresh.failure(row.payload) is not None:
            failed[kind, batch.pk if batch else None, version] = mark
    refresh.store_failed(failed, f"{type(error).__name__}: {error}")


def ranking_figures(batch: Batch | None, versions: list[str], *, marks: Watermarks | None = None
                    ) -> dict[str, RankingFigures]:
    """Current figures (stale parts computed and stored here). `marks`: `watermarks(batch)`,
    when the caller has it."""
    marks = marks or watermarks(batch)
    agreement = _current(batch, "agreement", versions, marks, agreements)
    graded = _current(batch, "gradings", versions, marks, grading_figures)
    return {v: _ranking(v, agreement[v], graded[v]) for v in versions}


def correctness_figures(batch: Batch | None, versions: list[str], *, marks: Watermarks | None = None
                        ) -> dict[str, Correctness]:
    """Each version against people's verdicts (webapp.audit.correctness); current."""
    return _current(batch, "correctness", versions, marks or watermarks(batch), correctness)


def verdict_figures(batch: Batch | None, versions: list[str], *, marks: Watermarks | None = None
                    ) -> dict[str, VerdictFigures]:
    """Shares of the auditors' verdicts on each version's audited gradings, per verdict and per
    error category (a verdict may name several categories), with Wilson intervals; current."""
    return _current(batch, "verdicts", versions, marks or watermarks(batch), _verdicts)


def annotator_concordance(batch: Batch | None, *, marks: Watermarks | None = None) -> Concordance:
    """The annotators' concordance over the selection; current."""
    return _current(batch, "concordance", [""], marks or watermarks(batch), lambda b, _: {"": concordance(b)})[""]


def gold_drift(batch: Batch | None, versions: list[Version], *, marks: Watermarks | None = None) -> Drift:
    """The gold set's drift over `versions`; current."""
    return _current(batch, "drift", [""], marks or watermarks(batch), lambda b, _: {"": _drift(b, versions)},
                    drift_names=sorted(v.version for v in versions))[""]


# --- the stored parts ----------------------------------------------------------------------

PAYLOADS = {"correctness": Correctness, "agreement": AgreementSummary, "gradings": GradingFigures,
            "verdicts": VerdictFigures, "drift": Drift, "concordance": Concordance}


def _key(kind: str, batch: Batch | None, version: str) -> str:
    return refresh.part_key(kind, batch.pk if batch else None, version)


def _mark(kind: str, version: str, marks: Watermarks, drift_names: list[str]) -> tuple:
    """The data watermark of a part (see the module's docstring)."""
    if kind == "correctness":  # verdicts: their corrected rankings; trajectories: the baselines' patches
        return marks.gradings.get(version), marks.annotations, marks.verdicts, marks.trajectories
    if kind == "agreement":
        return marks.gradings.get(version), marks.annotations
    if kind == "gradings":
        return marks.gradings.get(version), marks.trajectories
    if kind == "verdicts":
        return marks.verdicts
    if kind == "concordance":  # annotations are only ever inserted: the latest one marks them all
        return marks.annotations
    # no annotation mark: a gold group's verified ranking is a fixed version, marked again only by a gold mark
    return drift_names, [marks.gradings.get(v) for v in drift_names], marks.gold


def _current(batch: Batch | None, kind: str, versions: list[str], marks: Watermarks, compute,
             drift_names: list[str] = (), found: dict | None = None) -> dict:
    """The current figures of a kind per version: stored, or `compute(batch, stale)` for the
    versions whose stored figures are stale or missing, all of them in one call (one pass over
    the data), and stored. `found`: the stored rows, when the caller read them."""
    keys = {v: _key(kind, batch, v) for v in versions}
    current = {v: refresh.watermark(_mark(kind, v, marks, drift_names)) for v in versions}
    found = refresh.read(list(keys.values())) if found is None else found
    out = {v: refresh.decode(PAYLOADS[kind], found[keys[v]].payload) for v in versions
           if keys[v] in found and found[keys[v]].payload is not None and found[keys[v]].watermark == current[v]
           and refresh.failure(found[keys[v]].payload) is None}
    stale = [v for v in versions if v not in out]
    if stale:
        computed = compute(batch, stale)
        refresh.store({(kind, batch.pk if batch else None, v): (current[v], computed[v]) for v in stale})
        out.update(computed)
    return out


def _ranking(version: str, agreement: AgreementSummary, graded: GradingFigures) -> RankingFigures:
    return RankingFigures(version=version, agreement=agreement,
                          **{f.name: getattr(graded, f.name) for f in fields(GradingFigures)})


def watermarks(batch: Batch | None) -> Watermarks:
    """Per version, its gradings' latest finish and count (grading's selector); the latest
    annotation and trajectory; the gold set's and the verdicts' counts and latest changes."""
    gradings = grading_watermarks(batch)
    if not gradings:  # nothing graded: no version, no figure to key
        return Watermarks({}, "", "", (), ())
    quote = connection.ops.quote_name
    gold, verdict = quote(GoldGroup._meta.db_table), quote(AuditVerdict._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT MAX(id) FROM {quote(Trajectory._meta.db_table)}), "
            f"(SELECT COUNT(*) FROM {gold}), (SELECT MAX(marked_at) FROM {gold}), "
            f"(SELECT COUNT(*) FROM {verdict}), (SELECT MAX(updated_at) FROM {verdict})")
        rest = [str(value) for value in cursor.fetchone()]
    annotations = str(Annotation.objects.aggregate(latest=Max("id"))["latest"])
    return Watermarks(gradings=gradings, annotations=annotations, trajectories=rest[0], gold=tuple(rest[1:3]),
                      verdicts=tuple(rest[3:5]))


# --- verdicts and the gold set -------------------------------------------------------------


def _verdicts(batch: Batch | None, versions: list[str]) -> dict[str, VerdictFigures]:
    rows = AuditVerdict.objects.filter(item__grading__run__grader_version__in=versions)
    if batch is not None:
        rows = rows.filter(item__group__batch=batch)
    counts = {v: defaultdict(int) for v in versions}
    categories = {v: defaultdict(int) for v in versions}
    # Counted in SQL: a row per (version, verdict, categories), a few dozen, not one per verdict.
    columns = ("item__grading__run__grader_version", "verdict", "categories")
    grouped = rows.values(*columns).annotate(n=Count("pk")).order_by().values_list(*columns, "n")
    for version, verdict, named, n in grouped:
        counts[version][verdict] += n
        for category in set(named or ()):
            categories[version][category] += n
    out = {}
    for version in versions:
        n = sum(counts[version].values())
        out[version] = VerdictFigures(
            verdicts=[wilson(counts[version][value], n, label) for value, label in AuditVerdict.Verdict.choices],
            categories=[wilson(categories[version][value], n, label)
                        for value, label in AuditVerdict.Category.choices])
    return out


def _drift(batch: Batch | None, versions: list[Version]) -> Drift:
    """Agreement of each version with the gold set's verified rankings, in time order, and a
    warning for each version whose agreement fell below the previous version's: its whole
    95% interval lies below the previous point estimate (per measure, between consecutive
    versions where both are defined)."""
    gold = GoldGroup.objects.all() if batch is None else GoldGroup.objects.filter(group__batch=batch)
    verified = Annotation.objects.filter(group=OuterRef("group_id"),
                                         version=OuterRef("group__gold__annotation_version"))
    rows = (Grading.objects.filter(status=DONE, group__in=gold.values("group"),
                                   run__grader_version__in=[v.version for v in versions])
            .annotate(verified=Subquery(verified.values("tiers")[:1]))
            .order_by("group_id", "-finished_at", "-pk").values_list("run__grader_version", "group_id", "tiers",
                                                                      "verified"))
    pairs: dict[str, dict[int, tuple]] = {v.version: {} for v in versions}
    gold_groups = set()
    for version, group, tiers, verified_tiers in rows:
        gold_groups.add(group)
        if group not in pairs[version] and verified_tiers is not None:
            pairs[version][group] = (verified_tiers, tiers)
    points = [DriftPoint(v, agreement_summary([pairs[v.version][g] for g in sorted(pairs[v.version])]))
              for v in versions if pairs[v.version]]
    return Drift(gold_groups=len(gold_groups), points=points, warnings=drift_warnings(points))


def drift_warnings(points: list[DriftPoint]) -> list[DriftWarning]:
    warnings = []
    for key, label in DRIFT_MEASURES:
        defined = [(p.version.version, getattr(p.agreement, key)) for p in points
                   if getattr(p.agreement, key).value is not None]
        for (previous, before), (version, now) in zip(defined, defined[1:], strict=False):
            if now.interval[1] < before.value:
                warnings.append(DriftWarning(version, previous, label, now.value, now.interval, before.value))
    return warnings
