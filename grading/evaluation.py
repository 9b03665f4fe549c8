"""How well a grader ranks passing patches, measured against a proxy of quality.

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

from grading.agreement import Estimate, Tiers, bootstrap_interval, kendall_tau, top1_share
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
