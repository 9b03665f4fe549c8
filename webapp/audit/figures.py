"""Every figure of the audit dashboard, per grader version, from the database: one selector
module that the dashboard pages, their CSV downloads and the audit report read.

A grader version is a `GradingRun.grader_version` (every grading of a run shares it; a run
with no finished grading has none yet and is not counted). Versions are ordered by their
first run. Per version, over the groups of the selection (one batch, or all):

- agreement with humans: each group whose final ranking is a human one, against the
  version's latest finished grading of it (`grading.agreement.summarise`: means with
  bootstrap intervals over groups);
- proxy agreement: against "closest to the human fix" where the task has a reference
  patch (`grading.evaluation`; a proxy, labelled so);
- verdicts and error categories: the share of auditors' verdicts on the version's audited
  gradings, with Wilson score intervals (closed form, exact coverage for a proportion
  near 0 or 1 better than the normal one);
- failure rate: failed gradings / finished (done or failed) ones, Wilson interval;
- cost: tokens and seconds per graded group (mean, p50, p95);
- position bias: `rank_correlation_with` the order the grader was shown the trajectories
  in, their patch length (characters) and their turn count;
- advantages: the distribution of the schedule's factors and of the shift GAGAR makes
  (redistributed advantage − GRPO advantage) under the version's rankings.

The figures from gradings, rankings and trajectories cost seconds over 10,000 groups
(bootstrap intervals, patch similarity), so they are cached per selection and data
watermark: the latest finished grading, the grading count, the latest annotation, the
latest trajectory, the gold set's size and latest mark, and the verdicts' count and latest
change. Any new grading, ranking, import, gold mark or verdict changes the watermark and so
the key; nothing is invalidated by hand. Verdict rates and the gold set's drift are cached
the same way, each under a key of its own.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Max, Min, OuterRef, Subquery, Window
from django.db.models.functions import Length, RowNumber

from grading.agreement import AgreementSummary, Estimate, mean_estimate, rank_correlation_with, summarise
from grading.evaluation import PROXY_LABEL, ReferenceGroup, kendall_tau, proxy_tiers, top1_share, usable
from grading.graders.agentic import run_seed
from grading.graders.base import GroupView, TrajectoryView
from grading.rankings import ranks_from_tiers
from grading.workspace import Workspace
from webapp.advantages import AdvantageConfig, _chunk
from webapp.models import Annotation, AuditVerdict, Batch, GoldGroup, Grading, GradingRun, Trajectory
from webapp.rankings import FinalRanking

DONE, FAILED = Grading.Status.DONE, Grading.Status.FAILED
MEASURES = (("kendall_tau", "Kendall tau-b"), ("pairwise_accuracy", "pairwise accuracy"), ("top1", "top-1"),
            ("spearman", "Spearman rho"))
DRIFT_MEASURES = MEASURES[:3]
COVARIATES = (("shown", "order shown to the grader"), ("patch_length", "patch length (characters)"),
              ("turns", "turn count"))
Z95 = 1.959963984540054  # two-sided 95% normal quantile
CACHE_SECONDS = 24 * 3600
FACTOR_BINS = 10
SHIFT_BINS = 12


@dataclass(frozen=True)
class Version:
    version: str
    grader: str  # the grader of its first run (a profile name or module:Class)
    first_run_at: datetime


@dataclass(frozen=True)
class Rate:
    """`count` of `n`, the share and its 95% Wilson interval (None when n is 0)."""

    label: str
    count: int
    n: int
    value: float | None
    interval: tuple[float, float] | None


@dataclass(frozen=True)
class Spread:
    mean: float | None
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class Cost:
    groups: int
    tokens: Spread
    seconds: Spread


@dataclass(frozen=True)
class Histogram:
    edges: list[float]  # len(counts) + 1
    counts: list[int]


@dataclass(frozen=True)
class Proxy:
    label: str
    groups_with_reference: int
    kendall_tau: Estimate
    top1: Estimate


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
    ranking: RankingFigures
    verdicts: VerdictFigures


@dataclass(frozen=True)
class Dashboard:
    batch: Batch | None
    versions: list[VersionDashboard] = field(default_factory=list)
    drift: Drift | None = None


# --- entry points ------------------------------------------------------------------------


def grader_versions(batch: Batch | None) -> list[Version]:
    """The versions that graded something in `batch` (None: anywhere), by their first run."""
    runs = GradingRun.objects.exclude(grader_version="")
    if batch is not None:
        runs = runs.filter(batch=batch)
    rows = (runs.values("grader_version").annotate(first=Min("created_at"), grader=Min("grader"))
            .order_by("first", "grader_version").values_list("grader_version", "grader", "first"))
    return [Version(version, grader, first) for version, grader, first in rows]


def dashboard(batch: Batch | None, versions: list[Version], *, all_versions: list[Version]) -> Dashboard:
    """Every figure of the selected `versions` over `batch` (None: every batch), and the gold
    set's drift over `all_versions` (the batch's, in time order)."""
    names = [v.version for v in versions]
    watermark = _watermark(batch, [v.version for v in all_versions])  # read once for both caches
    ranking = ranking_figures(batch, names, watermark=watermark)
    verdicts = verdict_figures(batch, names, watermark=watermark)
    return Dashboard(batch=batch, versions=[VersionDashboard(v, ranking[v.version], verdicts[v.version])
                                            for v in versions],
                     drift=gold_drift(batch, all_versions, watermark=watermark))


# --- rates, spreads, histograms ------------------------------------------------------------


def wilson(count: int, n: int, label: str = "") -> Rate:
    """count / n with its 95% Wilson score interval."""
    if not n:
        return Rate(label, count, n, None, None)
    p = count / n
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    return Rate(label, count, n, p, (max(0.0, centre - half), min(1.0, centre + half)))


def spread(values: list[float]) -> Spread:
    if not values:
        return Spread(None, None, None)
    data = np.asarray(values, dtype=np.float64)
    p50, p95 = np.percentile(data, [50, 95])
    return Spread(float(data.mean()), float(p50), float(p95))


def histogram(values: np.ndarray, edges: np.ndarray) -> Histogram:
    return Histogram([float(e) for e in edges], np.histogram(values, edges)[0].tolist())


# --- the cached part: gradings against rankings and data -----------------------------------


def ranking_figures(batch: Batch | None, versions: list[str], *, watermark: tuple | None = None
                    ) -> dict[str, RankingFigures]:
    """`watermark`: `_watermark` of these versions or more, when the caller has it."""
    if not versions:
        return {}
    return _cached("ranking", batch, versions, watermark, lambda: _compute(batch, versions))


def _cached(kind: str, batch: Batch | None, versions: list[str], watermark: tuple | None, compute):
    if watermark is None:
        watermark = _watermark(batch, versions)
    key = f"gagar:audit-{kind}:" + hashlib.sha256(
        repr((batch.pk if batch else None, sorted(versions), watermark)).encode()).hexdigest()
    figures = cache.get(key)
    if figures is None:
        figures = compute()
        cache.set(key, figures, CACHE_SECONDS)
    return figures


def _gradings(batch: Batch | None, versions: list[str]):
    gradings = Grading.objects.filter(run__grader_version__in=versions)
    return gradings if batch is None else gradings.filter(run__batch=batch)


def _watermark(batch: Batch | None, versions: list[str]) -> tuple:
    """What changes whenever a cached figure would: see the module's docstring."""
    gradings = _gradings(batch, versions).aggregate(latest=Max("finished_at"), n=Count("pk"))
    quote = connection.ops.quote_name
    gold, verdict = quote(GoldGroup._meta.db_table), quote(AuditVerdict._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT (SELECT MAX(id) FROM {quote(Annotation._meta.db_table)}), "
                       f"(SELECT MAX(id) FROM {quote(Trajectory._meta.db_table)}), "
                       f"(SELECT COUNT(*) FROM {gold}), (SELECT MAX(marked_at) FROM {gold}), "
                       f"(SELECT COUNT(*) FROM {verdict}), (SELECT MAX(updated_at) FROM {verdict})")
        rest = cursor.fetchone()
    return str(gradings["latest"]), gradings["n"], *(str(value) for value in rest)


@dataclass
class _Graded:
    """A version's latest finished grading of one group."""

    pk: int
    tiers: tuple[tuple[str, ...], ...]
    flags: dict
    scores: dict | None
    tokens: int
    seconds: float | None
    seed: int | None  # the agentic grader's seed; None for any other grader


def _compute(batch: Batch | None, versions: list[str]) -> dict[str, RankingFigures]:
    graded: dict[str, dict[int, _Graded]] = {v: {} for v in versions}
    finished = {v: [0, 0] for v in versions}  # failed, finished
    rows = (_gradings(batch, versions).filter(status__in=(DONE, FAILED))
            .order_by("group_id", "-finished_at", "-pk")
            .values_list("run__grader_version", "group_id", "status", "pk", "tiers", "flags", "scores",
                         "tokens", "duration_s", "run__config__grader", "run__config__seed"))
    for version, group, status, pk, tiers, flags, scores, tokens, seconds, grader, seed in rows:
        finished[version][1] += 1
        if status == FAILED:
            finished[version][0] += 1
        elif group not in graded[version]:
            # The agentic grader's label shuffle is seeded by its profile's seed (see _shown_positions).
            graded[version][group] = _Graded(pk, tuple(tuple(t) for t in tiers or ()), flags or {}, scores,
                                             tokens, seconds, (seed or 0) if grader == "agentic" else None)
    groups = _gradings(batch, versions).filter(status=DONE).values("group_id")
    humans = _human_rankings(batch)
    data = _trajectories(groups)
    proxies = _proxies(groups)
    configs = dict(Batch.objects.filter(pk__in={d.batch for d in data.values()}).values_list("pk", "advantage_config"))
    out = {}
    for version in versions:
        by_group = graded[version]
        pairs = [(humans[g], by_group[g].tiers) for g in sorted(by_group) if g in humans]
        used = [(proxies[g], by_group[g].tiers) for g in sorted(by_group) if g in proxies]
        out[version] = RankingFigures(
            version=version, graded=len(by_group), agreement=summarise(pairs),
            proxy=Proxy(PROXY_LABEL, len(used),
                        mean_estimate([kendall_tau(p, tiers) for p, tiers in used]),
                        mean_estimate([top1_share(reference=p, predicted=tiers) for p, tiers in used])),
            failure=wilson(*finished[version], label="failed"),
            cost=Cost(len(by_group), spread([g.tokens for g in by_group.values()]),
                      spread([g.seconds for g in by_group.values() if g.seconds is not None])),
            bias=_bias(by_group, data),
            **_advantages(version, by_group, data, configs),
        )
    return out


def _human_rankings(batch: Batch | None) -> dict[int, tuple]:
    """Each group's final ranking where it is a human one, by group pk: the head of its final
    chain (as webapp.rankings.chain_heads), in one query over the selection."""
    heads = Annotation.objects.filter(independent=False)
    if batch is not None:
        heads = heads.filter(group__batch=batch)
    heads = (heads.annotate(head=Window(RowNumber(), partition_by=[F("group_id")], order_by=F("version").desc()))
             .filter(head=1).values_list("group_id", "tiers"))
    return {group: tuple(tuple(t) for t in tiers) for group, tiers in heads if tiers is not None}


@dataclass
class _Group:
    """A graded group's trajectories as the grader was handed them (trajectory id order)."""

    batch: int
    group_id: str
    ids: list[str] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    turns: list[float | None] = field(default_factory=list)


def _trajectories(groups) -> dict[int, _Group]:
    """`groups`: a subquery of group pks."""
    out: dict[int, _Group] = {}
    rows = (Trajectory.objects.filter(group_id__in=groups).order_by("group_id", "trajectory_id")
            .values_list("group_id", "group__batch_id", "group__group_id", "trajectory_id", "passed", "reward",
                         Length("patch"), "metrics__num_turns"))
    for group, batch, group_id, tid, passed, reward, length, turns in rows:
        g = out.get(group) or out.setdefault(group, _Group(batch, group_id))
        g.ids.append(tid)
        g.passed.append(passed)
        g.rewards.append(reward)
        g.lengths.append(length)
        g.turns.append(float(turns) if isinstance(turns, int | float) and math.isfinite(turns) else None)
    return out


def _proxies(groups) -> dict[int, tuple]:
    """The proxy ranking of each graded group whose task has a reference fix and whose passing
    patches it tells apart (`grading.evaluation.usable`)."""
    by_group: dict[int, tuple[str, str, list]] = {}
    rows = (Trajectory.objects.filter(group_id__in=groups, passed=True)
            .exclude(group__reference_patch=None).exclude(group__reference_patch="")
            .order_by("group_id", "trajectory_id")
            .values_list("group_id", "group__group_id", "group__reference_patch", "trajectory_id", "patch"))
    for group, group_id, reference, tid, patch in rows:
        by_group.setdefault(group, (group_id, reference, []))[2].append(TrajectoryView(tid, True, 1.0, patch))
    out = {}
    for group, (group_id, reference, passing) in by_group.items():
        tiers = proxy_tiers(ReferenceGroup(GroupView(group_id=group_id, statement="", repo="",
                                                     trajectories=tuple(passing)), reference))
        if usable(tiers):
            out[group] = tiers
    return out


def _shown_positions(g: _Group, seed: int | None) -> list[int]:
    """Where each trajectory of `g` stood in what the grader was shown: the agentic grader
    sees labels A, B, ... from its first run's seeded shuffle (grading.workspace), any
    other grader the trajectories in trajectory id order."""
    if seed is None:
        return list(range(len(g.ids)))
    view = GroupView(group_id=g.group_id, statement="", repo="", trajectories=tuple(
        TrajectoryView(tid, passed, reward, "") for tid, passed, reward in zip(g.ids, g.passed, g.rewards,
                                                                               strict=True)))
    workspace = Workspace(view, run_seed(seed, g.group_id, 0))
    label_index = {label: i for i, label in enumerate(workspace.labels)}
    return [label_index[workspace.label_of(tid)] for tid in g.ids]


def _bias(by_group: dict[int, _Graded], data: dict[int, _Group]) -> dict[str, Estimate]:
    columns: dict[str, tuple[list, list, list]] = {key: ([], [], []) for key, _ in COVARIATES}
    for group, grading in by_group.items():
        g = data.get(group)
        if g is None:
            continue
        ranks = ranks_from_tiers(grading.tiers)
        shown = _shown_positions(g, grading.seed)
        for i, tid in enumerate(g.ids):
            if tid not in ranks:
                continue
            for key, value in (("shown", shown[i]), ("patch_length", g.lengths[i]), ("turns", g.turns[i])):
                if value is not None:
                    ranks_, values, names = columns[key]
                    ranks_.append(ranks[tid])
                    values.append(value)
                    names.append(str(group))
    return {key: rank_correlation_with(*columns[key]) for key, _ in COVARIATES}


def _advantages(version: str, by_group: dict[int, _Graded], data: dict[int, _Group],
                configs: dict[int, dict]) -> dict[str, Histogram]:
    """Factors of the ranked trajectories and shifts of the passing ones of mixed groups, under
    each batch's redistribution config, with the version's rankings as the groups' rankings."""
    factors, shifts = [], []
    by_batch: dict[int, list[int]] = defaultdict(list)
    for group in sorted(by_group):
        if group in data:
            by_batch[data[group].batch].append(group)
    for batch, groups in by_batch.items():
        rows = [(group, tid, reward, passed) for group in groups
                for tid, reward, passed in zip(data[group].ids, data[group].rewards, data[group].passed,
                                               strict=True)]
        rankings = {group: FinalRanking(
            tiers=by_group[group].tiers, flags={t: tuple(f) for t, f in by_group[group].flags.items() if f},
            scores=by_group[group].scores, source="grader", grading_id=by_group[group].pk, grader_version=version,
        ) for group in groups}
        chunk = _chunk(rows, {group: data[group].group_id for group in groups},
                       AdvantageConfig.from_dict(configs[batch]), rankings=rankings)
        factor = chunk.factor[~np.isnan(chunk.factor)]
        factors.append(factor)
        mixed = np.array([chunk.label[g] == "mixed" for g in chunk.group_index.tolist()], dtype=bool)
        moved = mixed & chunk.passed
        shifts.append(chunk.advantage[moved] - chunk.grpo_advantage[moved])
    factor = np.concatenate(factors) if factors else np.zeros(0)
    shift = np.concatenate(shifts) if shifts else np.zeros(0)
    reach = float(np.abs(shift).max()) if shift.size and np.abs(shift).max() > 0 else 1.0
    return {"factors": histogram(factor, np.linspace(0, 1, FACTOR_BINS + 1)),
            "shifts": histogram(shift, np.linspace(-reach, reach, SHIFT_BINS + 1))}


# --- read fresh: verdicts and the gold set -------------------------------------------------


def verdict_figures(batch: Batch | None, versions: list[str], *, watermark: tuple | None = None
                    ) -> dict[str, VerdictFigures]:
    """Shares of the auditors' verdicts on each version's audited gradings, per verdict and per
    error category (a verdict may name several categories), with Wilson intervals."""
    return _cached("verdicts", batch, versions, watermark, lambda: _verdicts(batch, versions))


def _verdicts(batch: Batch | None, versions: list[str]) -> dict[str, VerdictFigures]:
    rows = AuditVerdict.objects.filter(item__grading__run__grader_version__in=versions)
    if batch is not None:
        rows = rows.filter(item__group__batch=batch)
    counts = {v: defaultdict(int) for v in versions}
    categories = {v: defaultdict(int) for v in versions}
    for version, verdict, named in rows.values_list("item__grading__run__grader_version", "verdict", "categories"):
        counts[version][verdict] += 1
        for category in set(named or ()):
            categories[version][category] += 1
    out = {}
    for version in versions:
        n = sum(counts[version].values())
        out[version] = VerdictFigures(
            verdicts=[wilson(counts[version][value], n, label) for value, label in AuditVerdict.Verdict.choices],
            categories=[wilson(categories[version][value], n, label)
                        for value, label in AuditVerdict.Category.choices])
    return out


def gold_drift(batch: Batch | None, versions: list[Version], *, watermark: tuple | None = None) -> Drift:
    return _cached("drift", batch, [v.version for v in versions], watermark, lambda: _drift(batch, versions))


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
    points = [DriftPoint(v, summarise([pairs[v.version][g] for g in sorted(pairs[v.version])]))
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
