"""The costly part of the dashboard's figures: what grader versions' rankings say, against the
people's rankings, the reference-fix proxy and the trajectories' data (webapp.audit.figures
caches each part per version and says when it is computed again).

Every group is measured at once (grading.agreement's `_many` functions and `mean_estimates`:
the per-group functions' figures, without a numpy call per group), and each group's proxy
ranking is read from `ReferenceProxy`, computed and stored the first time it is needed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Case, F, Q, When, Window
from django.db.models.functions import Length, RowNumber

from grading.agreement import (
    AgreementSummary,
    Estimate,
    group_agreement_many,
    mean_estimates,
    rank_correlation_rows,
    top1_share,
)
from grading.cases import GroupCase, TrajectoryCase
from grading.evaluation import PROXY_LABEL, ReferenceGroup, proxy_tiers, usable
from grading.graders.agentic import run_seed
from grading.profiles import LLM_GRADERS
from grading.rankings import ranks_from_tiers
from grading.rates import Rate, wilson
from grading.workspace import Workspace
from webapp.advantages.chunks import TrajectoryColumns, advantage_chunk
from webapp.advantages.config import parse_advantage_config
from webapp.models import Annotation, Batch, Grading, Group, ReferenceProxy, Trajectory
from webapp.rankings import FinalRanking

DONE, FAILED = Grading.Status.DONE, Grading.Status.FAILED
COVARIATES = (("shown", "order shown to the grader"), ("patch_length", "patch length (characters)"),
              ("turns", "turn count"))
FACTOR_BINS = 10
SHIFT_BINS = 12


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
class GradingFigures:
    """A version's figures from its gradings and the trajectories alone (no person's ranking)."""

    graded: int  # groups with a finished grading by it
    proxy: Proxy
    failure: Rate
    cost: Cost
    bias: dict[str, Estimate]  # by COVARIATES key
    factors: Histogram
    shifts: Histogram


def gradings(batch: Batch | None, versions: list[str]):
    found = Grading.objects.filter(run__grader_version__in=versions)
    return found if batch is None else found.filter(run__batch=batch)


# --- against people ------------------------------------------------------------------------


def agreements(batch: Batch | None, versions: list[str]) -> dict[str, AgreementSummary]:
    """Each version's agreement with the groups' final human rankings: `summarise` of
    (human, version's latest finished grading) over those groups, in group order."""
    tiers: dict[str, dict[int, tuple]] = {v: {} for v in versions}
    rows = (gradings(batch, versions).filter(status=DONE).order_by("group_id", "-finished_at", "-pk")
            .values_list("run__grader_version", "group_id", "tiers"))
    for version, group, ranked in rows:
        tiers[version].setdefault(group, ranked or ())
    humans = human_rankings(batch)
    return {version: agreement_summary([(humans[g], tiers[version][g]) for g in sorted(tiers[version])
                                        if g in humans]) for version in versions}


def agreement_summary(pairs: list[tuple]) -> AgreementSummary:
    """`grading.agreement.summarise(pairs)`, every group measured at once."""
    measured = group_agreement_many(pairs)
    return AgreementSummary(*mean_estimates([measured.tau, measured.pairwise, measured.top1, measured.spearman]))


def human_rankings(batch: Batch | None) -> dict[int, tuple]:
    """Each group's final ranking where it is a human one, by group pk: the head of its final
    chain (as webapp.rankings.chain_heads), in one query over the selection."""
    heads = Annotation.objects.filter(independent=False)
    if batch is not None:
        heads = heads.filter(group__batch=batch)
    heads = (heads.annotate(head=Window(RowNumber(), partition_by=[F("group_id")], order_by=F("version").desc()))
             .filter(head=1).values_list("group_id", "tiers"))
    return {group: tuple(tuple(t) for t in tiers) for group, tiers in heads if tiers is not None}


# --- against the proxy and the data --------------------------------------------------------


@dataclass
class _Graded:
    """A version's latest finished grading of one group."""

    pk: int
    tiers: tuple[tuple[str, ...], ...]
    flags: dict
    scores: dict | None
    tokens: int
    seconds: float | None
    seed: int | None  # an LLM grader's seed (agentic or hybrid); None for any other grader


def grading_figures(batch: Batch | None, versions: list[str]) -> dict[str, GradingFigures]:
    graded: dict[str, dict[int, _Graded]] = {v: {} for v in versions}
    finished = {v: [0, 0] for v in versions}  # failed, finished
    rows = (gradings(batch, versions).filter(status__in=(DONE, FAILED))
            .order_by("group_id", "-finished_at", "-pk")
            .values_list("run__grader_version", "group_id", "status", "pk", "tiers", "flags", "scores",
                         "tokens", "duration_s", "run__config__grader", "run__config__seed"))
    for version, group, status, pk, tiers, flags, scores, tokens, seconds, grader, seed in rows:
        finished[version][1] += 1
        if status == FAILED:
            finished[version][0] += 1
        elif group not in graded[version]:
            # An LLM grader's label shuffle is seeded by its profile's seed (see _shown_positions).
            graded[version][group] = _Graded(pk, tuple(tuple(t) for t in tiers or ()), flags or {}, scores,
                                             tokens, seconds, (seed or 0) if grader in LLM_GRADERS else None)
    groups = gradings(batch, versions).filter(status=DONE).values("group_id")
    data = _trajectories(groups)
    proxies = _proxies(groups, data)
    configs = dict(Batch.objects.filter(pk__in={d.batch for d in data.values()}).values_list("pk", "advantage_config"))
    out = {}
    for version in versions:
        by_group = graded[version]
        used = [(proxies[g], by_group[g].tiers) for g in sorted(by_group) if g in proxies]
        measured = group_agreement_many(used)
        top1 = [top1_share(reference=p, predicted=tiers) for p, tiers in used]
        tau, top1 = mean_estimates([measured.tau, np.array([np.nan if s is None else s for s in top1])])
        out[version] = GradingFigures(
            graded=len(by_group), proxy=Proxy(PROXY_LABEL, len(used), tau, top1),
            failure=wilson(*finished[version], label="failed"),
            cost=Cost(len(by_group), spread([g.tokens for g in by_group.values()]),
                      spread([g.seconds for g in by_group.values() if g.seconds is not None])),
            bias=_bias(by_group, data), **_advantages(version, by_group, data, configs))
    return out


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
    patches: list[str | None] = field(default_factory=list)  # the passing ones', while its proxy is not stored


def _trajectories(groups) -> dict[int, _Group]:
    """`groups`: a subquery of group pks. The passing patches of a group whose proxy ranking
    is not stored yet come with them, for `_proxies` (the same query)."""
    unproxied = Q(group__reference_proxy=None) & ~Q(group__reference_patch=None) & ~Q(group__reference_patch="")
    out: dict[int, _Group] = {}
    rows = (Trajectory.objects.filter(group_id__in=groups).order_by("group_id", "trajectory_id")
            .values_list("group_id", "group__batch_id", "group__group_id", "trajectory_id", "passed", "reward",
                         Length("patch"), "metrics__num_turns",
                         Case(When(unproxied & Q(passed=True), then=F("patch")))))  # the proxy ranks passing ones
    for group, batch, group_id, tid, passed, reward, length, turns, patch in rows:
        g = out.get(group) or out.setdefault(group, _Group(batch, group_id))
        g.ids.append(tid)
        g.passed.append(passed)
        g.rewards.append(reward)
        g.lengths.append(length)
        g.turns.append(float(turns) if isinstance(turns, int | float) and math.isfinite(turns) else None)
        g.patches.append(patch)
    return out


def _proxies(groups, data: dict[int, _Group]) -> dict[int, tuple]:
    """The proxy ranking of each of `groups` (a subquery of pks; `data` their trajectories)
    whose task has a reference fix and whose passing patches it tells apart
    (`grading.evaluation.usable`); those not stored yet are computed and stored."""
    with_reference = Group.objects.filter(pk__in=groups).exclude(reference_patch=None).exclude(reference_patch="")
    stored = dict(with_reference.values_list("pk", "reference_proxy__tiers"))
    missing = [pk for pk, tiers in stored.items() if tiers is None]
    if missing:
        references = dict(Group.objects.filter(pk__in=missing).values_list("pk", "reference_patch"))
        stored.update(_store_proxies({pk: (data[pk], references[pk]) for pk in missing}))
    return {pk: tuple(tuple(t) for t in tiers) for pk, tiers in stored.items() if usable(tiers)}


def _store_proxies(groups: dict[int, tuple[_Group, str]]) -> dict[int, list]:
    """Compute the proxy ranking of `groups` (each with its patches, and its reference fix) and
    store it; a row stored meanwhile by another request stays (same group, same ranking)."""
    out = {}
    for pk, (g, reference) in groups.items():
        view = GroupCase(group_id=g.group_id, statement="", repo="", trajectories=tuple(
            TrajectoryCase(tid, True, 1.0, patch) for tid, passed, patch in zip(g.ids, g.passed, g.patches, strict=True)
            if passed))
        out[pk] = [list(tier) for tier in proxy_tiers(ReferenceGroup(view, reference))]
    ReferenceProxy.objects.bulk_create((ReferenceProxy(group_id=pk, tiers=tiers) for pk, tiers in out.items()),
                                       batch_size=2000, ignore_conflicts=True)
    return out


def _shown_positions(g: _Group, seed: int | None) -> list[int]:
    """Where each trajectory of `g` stood in what the grader was shown: the agentic grader
    sees labels A, B, ... from its first run's seeded shuffle (grading.workspace), any
    other grader the trajectories in trajectory id order."""
    if seed is None:
        return list(range(len(g.ids)))
    view = GroupCase(group_id=g.group_id, statement="", repo="", trajectories=tuple(
        TrajectoryCase(tid, passed, reward, "") for tid, passed, reward in zip(g.ids, g.passed, g.rewards,
                                                                               strict=True)))
    workspace = Workspace(view, run_seed(seed, g.group_id, 0))
    label_index = {label: i for i, label in enumerate(workspace.labels)}
    return [label_index[workspace.label_of(tid)] for tid in g.ids]


def _bias(by_group: dict[int, _Graded], data: dict[int, _Group]) -> dict[str, Estimate]:
    """`rank_correlation_with` each covariate, over the groups in group order, at once."""
    columns: dict[str, tuple[list, list]] = {key: ([], []) for key, _ in COVARIATES}  # per group: ranks, values
    for group in sorted(by_group):
        g = data.get(group)
        if g is None:
            continue
        ranks = ranks_from_tiers(by_group[group].tiers)
        shown = _shown_positions(g, by_group[group].seed)
        for key, values in (("shown", shown), ("patch_length", g.lengths), ("turns", g.turns)):
            kept = [(ranks[tid], value) for tid, value in zip(g.ids, values, strict=True)
                    if tid in ranks and value is not None]
            if kept:
                columns[key][0].append([rank for rank, _ in kept])
                columns[key][1].append([value for _, value in kept])
    per_group = [rank_correlation_rows(*columns[key]) for key, _ in COVARIATES]
    return dict(zip((key for key, _ in COVARIATES), mean_estimates(per_group), strict=True))


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
        rows = TrajectoryColumns.of([(group, tid, reward, passed) for group in groups
                                     for tid, reward, passed in zip(data[group].ids, data[group].rewards,
                                                                    data[group].passed, strict=True)])
        rankings = {group: FinalRanking(
            tiers=by_group[group].tiers, flags={t: tuple(f) for t, f in by_group[group].flags.items() if f},
            scores=by_group[group].scores, source="grader", grading_id=by_group[group].pk, grader_version=version,
        ) for group in groups}
        chunk = advantage_chunk(rows, {group: data[group].group_id for group in groups},
                                parse_advantage_config(configs[batch]), rankings=rankings)
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


# --- rates, spreads, histograms ------------------------------------------------------------

def spread(values: list[float]) -> Spread:
    if not values:
        return Spread(None, None, None)
    data = np.asarray(values, dtype=np.float64)
    p50, p95 = np.percentile(data, [50, 95])
    return Spread(float(data.mean()), float(p50), float(p95))


def histogram(values: np.ndarray, edges: np.ndarray) -> Histogram:
    return Histogram([float(e) for e in edges], np.histogram(values, edges)[0].tolist())
