"""How well a grader ranks passing patches: against people's verdicts first, and against a
proxy of quality as a diagnostic.

**People's verdicts** are the measure (``evaluate_correctness``). A passing trajectory a
person marked not truly passing (a lucky pass, a reward hack) must rank below every one
they left passing: per group, the *pairwise accuracy* is the share of (correct, incorrect)
pairs the ranking orders so (a tie counts half) and the *top-1 incorrect rate* the chance
that a pick from its best tier is one they marked. An auditor's corrected ranking is a
second reference: the pairwise accuracy against the pairs it orders, and the *top-1
correct rate*, the chance that the pick is among its best. Each is averaged over the groups
that have such labels, with 95% bootstrap intervals over groups, beside shortest-first and
random (the mean of ``RANDOM_SEEDS`` shuffles per group).

The proxy, below, is a diagnostic only and labelled so: similarity to the human fix is at
chance at telling lucky passes from correct ones.

The proxy is similarity to the task's human fix (``reference_patch``): a
passing patch that changes the lines and files the human changed is taken to
be better than one that does more, less or something else. It is a proxy, not
a ground truth: a different but equally good fix scores low. Every table says so.

For each group with a reference fix, the passing patches get a proxy quality
(``proxy_quality``); a group is used when it has at least two passing patches
with at least two distinct proxy values. Per group, a ranking is compared with
the proxy's ranking by Kendall's tau-b and by top-1 (the chance that the
ranking's pick, uniformly from its best tier, is among the proxy's best); both
are averaged over groups with 95% bootstrap intervals over groups. Trivial
baselines are measured in the same run: shortest patch first, fewest files
first, and random (per group the mean of ``RANDOM_SEEDS`` seeded shuffles).

>>> round(proxy_quality(_DEMO, _DEMO), 2)
1.0
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grading.agreement import Estimate, Tiers, bootstrap_interval, kendall_tau, pairwise_accuracy, top1_share
from grading.cases import GroupCase, TrajectoryCase
from grading.diffs import parse_patch
from grading.rollouts import Rollout

PROXY_LABEL = "proxy: similarity to the reference fix"
RANDOM_SEEDS = 100

Ranker = Callable[[GroupCase], Tiers]

_DEMO = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


@dataclass(frozen=True)
class ReferenceGroup:
    """A group as a grader sees it, and the human fix it is measured against (which
    the grader never gets)."""

    view: GroupCase
    reference_patch: str


def reference_groups(rollouts: Iterable[Rollout]) -> list[ReferenceGroup]:
    """The groups of `rollouts` whose task has a reference fix, in order of first appearance."""
    members: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        members.setdefault(rollout.group_id, []).append(rollout)
    groups = []
    for group_id, rows in members.items():
        task = next((r.task for r in rows if r.task is not None), None)
        if task is None or not task.reference_patch:
            continue
        view = GroupCase(group_id=group_id, statement=task.statement, repo=task.repo, trajectories=tuple(
            TrajectoryCase(r.trajectory_id, r.passed, r.reward, r.patch, metrics=r.metrics) for r in rows))
        groups.append(ReferenceGroup(view, task.reference_patch))
    return groups


# --- the proxy -------------------------------------------------------------------

def changed_lines(patch: str) -> list[str]:
    """The added and removed lines of `patch`, sign kept, surrounding whitespace stripped;
    the ``+++``/``---`` file headers are not changes."""
    return [line.strip() for line in patch.splitlines()
            if line[:1] in ("+", "-") and not line.startswith(("+++", "---"))]


def touched_paths(patch: str) -> frozenset[str]:
    return frozenset(f.path for f in parse_patch(patch).files)


def proxy_quality(patch: str, reference: str) -> float:
    """0.5 x difflib ratio of the changed lines + 0.5 x Jaccard of the touched paths, in [0, 1]."""
    lines = difflib.SequenceMatcher(None, changed_lines(patch), changed_lines(reference), autojunk=False).ratio()
    mine, theirs = touched_paths(patch), touched_paths(reference)
    jaccard = len(mine & theirs) / len(mine | theirs) if mine | theirs else 0.0
    return 0.5 * lines + 0.5 * jaccard


def tiers_by(values: Mapping[str, float], *, higher_first: bool) -> tuple[tuple[str, ...], ...]:
    """Ids in tiers by value, equal values tied; ids sorted within a tier."""
    tiers: dict[float, list[str]] = {}
    for tid in sorted(values):
        tiers.setdefault(values[tid], []).append(tid)
    return tuple(tuple(tiers[v]) for v in sorted(tiers, reverse=higher_first))


def proxy_tiers(group: ReferenceGroup) -> tuple[tuple[str, ...], ...]:
    """The passing trajectories of `group` by proxy quality, best first."""
    return tiers_by({t.trajectory_id: round(proxy_quality(t.patch, group.reference_patch), 9)
                     for t in group.view.passing}, higher_first=True)


# --- baselines -------------------------------------------------------------------

def shortest_first(view: GroupCase) -> Tiers:
    """Fewest changed lines first."""
    return tiers_by({t.trajectory_id: len(changed_lines(t.patch)) for t in view.passing}, higher_first=False)


def fewest_files_first(view: GroupCase) -> Tiers:
    return tiers_by({t.trajectory_id: len(touched_paths(t.patch)) for t in view.passing}, higher_first=False)


def random_order(view: GroupCase, seed: int) -> Tiers:
    """A shuffle of the passing trajectories, the same for the same group and seed."""
    ids = sorted(t.trajectory_id for t in view.passing)
    random.Random(f"{seed}:{view.group_id}").shuffle(ids)
    return tuple((tid,) for tid in ids)


BASELINES: Mapping[str, Ranker] = {
    "shortest patch first": shortest_first,
    "fewest files first": fewest_files_first,
}
RANDOM = f"random (mean of {RANDOM_SEEDS} seeds)"


# --- measuring -------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    """One ranker's agreement with the proxy over the groups used. `separated` counts the
    groups where its ranking is not one tie (tau is defined, and averaged, only there)."""

    name: str
    groups: int
    separated: int
    tau: Estimate
    top1: Estimate


@dataclass(frozen=True)
class Evaluation:
    groups_with_reference: int
    used: tuple[str, ...]  # group ids, in input order
    results: tuple[Result, ...]  # the graders first, then the baselines


def usable(proxy: Tiers) -> bool:
    """At least two passing patches with at least two distinct proxy values."""
    return len(proxy) >= 2


def evaluate(groups: Sequence[ReferenceGroup], graders: Mapping[str, Ranker], *, seed: int = 0) -> Evaluation:
    """Each grader and each baseline against the proxy over the usable `groups`."""
    proxies = {g.view.group_id: proxy_tiers(g) for g in groups}
    used = [g for g in groups if usable(proxies[g.view.group_id])]
    results = []
    for name, ranker in {**graders, **BASELINES}.items():
        scores = [_measure(proxies[g.view.group_id], ranker(g.view)) for g in used]
        results.append(_result(name, [s[0] for s in scores], [s[1] for s in scores], seed))
    taus, hits = [], []
    for g in used:
        runs = [_measure(proxies[g.view.group_id], random_order(g.view, s)) for s in range(RANDOM_SEEDS)]
        taus.append(float(np.mean([tau for tau, _ in runs])))
        hits.append(float(np.mean([hit for _, hit in runs])))
    results.append(_result(RANDOM, taus, hits, seed))
    return Evaluation(len(groups), tuple(g.view.group_id for g in used), tuple(results))


def _measure(proxy: Tiers, ranking: Tiers) -> tuple[float | None, float]:
    return kendall_tau(proxy, ranking), top1_share(reference=proxy, predicted=ranking)


def _result(name: str, taus: list, hits: list, seed: int) -> Result:
    def estimate(values):
        kept = [float(v) for v in values if v is not None]
        if not kept:
            return Estimate(None, None, 0)
        return Estimate(float(np.mean(kept)), bootstrap_interval(kept, seed=seed), len(kept))

    tau = estimate(taus)
    return Result(name, len(hits), tau.n, tau, estimate(hits))


def format_table(evaluation: Evaluation) -> str:
    """The results as a text table, the proxy named in its header."""
    head = (f"{PROXY_LABEL}; {len(evaluation.used)} of {evaluation.groups_with_reference} groups with a "
            "reference fix used (>= 2 passing patches, >= 2 distinct proxy values)")
    width = max(len(r.name) for r in evaluation.results)
    lines = [head, f"{'ranking':<{width}}  groups  separated  mean tau-b [95% CI]      top-1 [95% CI]"]
    for r in evaluation.results:
        lines.append(f"{r.name:<{width}}  {r.groups:>6}  {r.separated:>9}  {_cell(r.tau, signed=True):<23}  "
                     f"{_cell(r.top1)}")
    return "\n".join(lines)


def _cell(e: Estimate, *, signed: bool = False) -> str:
    if e.value is None:
        return "-"
    number = f"{e.value:+.2f}" if signed else f"{e.value:.2f}"
    low, high = e.interval
    return f"{number} [{low:+.2f}, {high:+.2f}]" if signed else f"{number} [{low:.2f}, {high:.2f}]"


# --- people's verdicts ------------------------------------------------------------

VERDICTS_LABEL = "people's verdicts: passing trajectories a person marked not truly passing"
RANKINGS_LABEL = "auditors' corrected rankings"
CORRECTNESS_BASELINES: Mapping[str, Ranker] = {"shortest patch first": shortest_first}


@dataclass(frozen=True)
class LabelledGroup:
    """A group as a grader sees it (the reward's verdicts), and what people said of it:
    `incorrect`, the reward-passing ids a person marked not truly passing, among the
    `reviewed` group's passing ones (a person looked at each); `ranking`, a corrected
    ranking of those they kept, best first, if an auditor gave one."""

    view: GroupCase
    reviewed: bool = False
    incorrect: frozenset[str] = frozenset()
    ranking: Tiers | None = None


def correctness_tiers(group: LabelledGroup) -> Tiers | None:
    """(correct ids, incorrect ids) of a reviewed group that has both; else None."""
    if not group.reviewed:
        return None
    passing = sorted(t.trajectory_id for t in group.view.passing)
    incorrect = tuple(tid for tid in passing if tid in group.incorrect)
    correct = tuple(tid for tid in passing if tid not in group.incorrect)
    return (correct, incorrect) if correct and incorrect else None


@dataclass(frozen=True)
class CorrectnessResult:
    """One ranker over one reference: `top1` is the top-1 incorrect rate against people's
    verdicts, the top-1 correct rate against corrected rankings."""

    name: str
    groups: int
    pairwise: Estimate
    top1: Estimate


@dataclass(frozen=True)
class CorrectnessEvaluation:
    verdict_groups: tuple[str, ...]
    ranking_groups: tuple[str, ...]
    verdicts: tuple[CorrectnessResult, ...]  # the graders, then the baselines
    rankings: tuple[CorrectnessResult, ...]


def evaluate_correctness(groups: Sequence[LabelledGroup], graders: Mapping[str, Ranker], *,
                         seed: int = 0) -> CorrectnessEvaluation:
    """Each grader and each baseline against people's verdicts and against corrected rankings."""
    by_verdicts = [(g, tiers) for g in groups if (tiers := correctness_tiers(g))]
    by_rankings = [(g, g.ranking) for g in groups if g.ranking and sum(len(tier) for tier in g.ranking) >= 2
                   and len(g.ranking) >= 2]

    def measure(pairs, top1) -> list[CorrectnessResult]:
        results = []
        for name, ranker in {**graders, **CORRECTNESS_BASELINES}.items():
            scores = [_versus(reference, ranker(g.view), top1) for g, reference in pairs]
            results.append(_correctness_result(name, scores, seed))
        scores = []
        for g, reference in pairs:
            runs = [_versus(reference, random_order(g.view, s), top1) for s in range(RANDOM_SEEDS)]
            scores.append((_mean([r[0] for r in runs]), _mean([r[1] for r in runs])))
        results.append(_correctness_result(RANDOM, scores, seed))
        return results

    return CorrectnessEvaluation(
        tuple(g.view.group_id for g, _ in by_verdicts), tuple(g.view.group_id for g, _ in by_rankings),
        tuple(measure(by_verdicts, _top1_incorrect)), tuple(measure(by_rankings, _top1_correct)))


def _top1_incorrect(reference: Tiers, ranking: Tiers) -> float | None:
    share = top1_share(reference=reference, predicted=ranking)
    return None if share is None else 1.0 - share


def _top1_correct(reference: Tiers, ranking: Tiers) -> float | None:
    return top1_share(reference=reference, predicted=ranking)


def _versus(reference: Tiers, ranking: Tiers, top1) -> tuple[float | None, float | None]:
    return pairwise_accuracy(reference=reference, predicted=ranking), top1(reference, ranking)


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _correctness_result(name: str, scores: list, seed: int) -> CorrectnessResult:
    def estimate(values):
        kept = [float(v) for v in values if v is not None]
        if not kept:
            return Estimate(None, None, 0)
        return Estimate(float(np.mean(kept)), bootstrap_interval(kept, seed=seed), len(kept))

    return CorrectnessResult(name, len(scores), estimate(s[0] for s in scores), estimate(s[1] for s in scores))


def format_correctness(evaluation: CorrectnessEvaluation) -> str:
    """The correctness figures as two text tables, each reference named in its header."""
    lines = []
    for label, used, results, top1 in (
            (VERDICTS_LABEL, evaluation.verdict_groups, evaluation.verdicts, "top-1 incorrect"),
            (RANKINGS_LABEL, evaluation.ranking_groups, evaluation.rankings, "top-1 correct")):
        lines.append(f"{label}; {len(used)} group{'' if len(used) == 1 else 's'}")
        if not used:
            lines.append("  (none)")
            continue
        width = max(len(r.name) for r in results)
        lines.append(f"{'ranking':<{width}}  groups  pairwise accuracy [95% CI]  {top1} [95% CI]")
        for r in results:
            lines.append(f"{r.name:<{width}}  {r.groups:>6}  {_cell(r.pairwise):<26}  {_cell(r.top1)}")
    return "\n".join(lines)
