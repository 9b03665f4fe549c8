"""The advantages of whole groups, computed from their trajectories, rankings and config
with no database: `advantage_chunk` gives them as columns (`AdvantageChunk`), and its
rows are the table's rows (ROW_FIELDS), made only at the edge that needs a dict per
trajectory; `MixedAdvantages` gathers the chunks' columns for the grading panel's histogram."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grading.advantages import gagar_advantages
from webapp.advantages.config import AdvantageConfig
from webapp.rankings import FinalRanking, corrected_reward

ROW_FIELDS = (
    "group_id", "trajectory_id", "reward", "corrected_reward", "passed", "label", "grpo_advantage", "factor",
    "rank", "advantage", "source", "source_reason", "flags", "grader", "grader_version", "ranking_version",
)
# `reward` is the tests' reward; `corrected_reward` the reward of a trajectory whose verdict the
# group's human ranking overrode (else None), and `passed` the verdict after that correction:
# GRPO and the redistribution run on the corrected rewards and verdicts.
# Where a group's advantages come from: its ranking, a human's or the grader's (source "human",
# "grader"; reason "redistributed"); no ranking ("none", "no_ranking"); or a ranking that left
# the GRPO advantages as they were ("fallback"), because it does not rank exactly the passing
# trajectories (RANKING_MISMATCH), lacks a score the scores schedule needs (MISSING_SCORES), or
# for one of grading.advantages' reasons (single_pass, nonpositive_sum, equal_factors).
SOURCES = ("human", "grader", "fallback", "none")
RANKING_MISMATCH, MISSING_SCORES = "ranking_mismatch", "missing_scores"


@dataclass(frozen=True)
class TrajectoryColumns:
    """Trajectories' (group pk, trajectory id, reward, passed) as columns, each group's together."""

    group_pk: np.ndarray  # int64
    trajectory_id: list[str]
    reward: np.ndarray  # float64
    passed: np.ndarray  # bool

    @classmethod
    def of(cls, rows: Sequence[tuple]) -> "TrajectoryColumns":
        """From (group pk, trajectory id, reward, passed) tuples."""
        group_pk, trajectory_id, reward, passed = zip(*rows, strict=True) if rows else ((),) * 4
        return cls(np.array(group_pk, dtype=np.int64), list(trajectory_id), np.array(reward, dtype=np.float64),
                   np.array(passed, dtype=bool))

    def __len__(self) -> int:
        return len(self.trajectory_id)

    def slice(self, start: int, end: int) -> "TrajectoryColumns":
        return TrajectoryColumns(self.group_pk[start:end], self.trajectory_id[start:end], self.reward[start:end],
                                 self.passed[start:end])


@dataclass(frozen=True, eq=False)
class AdvantageChunk:
    """The advantages of whole groups, column by column: n trajectories of G groups, ordered
    by group id, then trajectory id.

    Per trajectory, shape (n,): `group_index` (intp, each one's group in 0..G-1, non-decreasing),
    `trajectory_ids`, `reward` (the tests'), `corrected_reward` (NaN: not overridden), `passed`
    (after the correction), `grpo_advantage`, `factor` (NaN: no factor), `rank`
    (0: not ranked), `advantage`; `flags` by position, for the few that have any. Per group,
    shape (G,): `group_ids`, `label`, `source`, `source_reason`, `grader`, `grader_version`,
    `ranking_version` (None where there is no such thing).
    """

    group_ids: list[str]
    group_index: np.ndarray
    trajectory_ids: list[str]
    reward: np.ndarray
    corrected_reward: np.ndarray
    passed: np.ndarray
    grpo_advantage: np.ndarray
    factor: np.ndarray
    rank: np.ndarray
    advantage: np.ndarray
    flags: dict[int, tuple[str, ...]]
    label: list[str]
    source: list[str]
    source_reason: list[str]
    grader: list[str | None]
    grader_version: list[str | None]
    ranking_version: list[str | None]

    def __len__(self) -> int:
        return len(self.trajectory_ids)

    @classmethod
    def concatenated(cls, chunks: Sequence["AdvantageChunk"]) -> "AdvantageChunk":
        """The rows of `chunks` one after the other, their groups numbered on."""
        if len(chunks) == 1:
            return chunks[0]
        rows = np.cumsum([0, *(len(c) for c in chunks)]).tolist()
        groups = np.cumsum([0, *(len(c.group_ids) for c in chunks)]).tolist()

        def joined(name: str) -> list:
            return [value for c in chunks for value in getattr(c, name)]

        def stacked(name: str) -> np.ndarray:
            return np.concatenate([getattr(c, name) for c in chunks])

        return cls(
            group_ids=joined("group_ids"),
            group_index=np.concatenate([c.group_index + first for c, first in zip(chunks, groups, strict=False)]),
            trajectory_ids=joined("trajectory_ids"), reward=stacked("reward"),
            corrected_reward=stacked("corrected_reward"), passed=stacked("passed"),
            grpo_advantage=stacked("grpo_advantage"), factor=stacked("factor"), rank=stacked("rank"),
            advantage=stacked("advantage"),
            flags={i + first: f for c, first in zip(chunks, rows, strict=False) for i, f in c.flags.items()},
            label=joined("label"), source=joined("source"), source_reason=joined("source_reason"),
            grader=joined("grader"), grader_version=joined("grader_version"), ranking_version=joined("ranking_version"),
        )

    def rows(self) -> list[dict]:
        """One dict of ROW_FIELDS per trajectory."""
        per_group = list(zip(self.group_ids, self.label, self.source, self.source_reason, self.grader,
                             self.grader_version, self.ranking_version, strict=True))
        factors = [None if math.isnan(f) else f for f in self.factor.tolist()]
        corrections = [None if math.isnan(r) else r for r in self.corrected_reward.tolist()]
        out = []
        for i, (g, tid, reward, corrected, passed, grpo, factor, rank, advantage) in enumerate(zip(
                self.group_index.tolist(), self.trajectory_ids, self.reward.tolist(), corrections,
                self.passed.tolist(), self.grpo_advantage.tolist(), factors, self.rank.tolist(),
                self.advantage.tolist(), strict=True)):
            group_id, label, source, reason, grader, grader_version, ranking_version = per_group[g]
            out.append({
                "group_id": group_id, "trajectory_id": tid, "reward": reward, "corrected_reward": corrected,
                "passed": passed, "label": label, "grpo_advantage": grpo, "factor": factor, "rank": rank or None,
                "advantage": advantage,
                "source": source, "source_reason": reason, "flags": list(self.flags.get(i, ())),
                "grader": grader, "grader_version": grader_version, "ranking_version": ranking_version,
            })
        return out


def advantage_chunk(trajectories: TrajectoryColumns, group_ids: Mapping[int, str], config: AdvantageConfig,
                    rankings: Mapping[int, FinalRanking]) -> AdvantageChunk:
    """The advantages of the groups of `trajectories` (each group's together) under `config`;
    `group_ids`: group id by pk; `rankings`: the ranking of each group that has one, by pk."""
    n = len(trajectories)
    group_pks = trajectories.group_pk
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = group_pks[1:] != group_pks[:-1]
    starts = np.flatnonzero(new_group)
    group_index = np.cumsum(new_group, dtype=np.intp) - 1
    bounds = np.append(starts, n).tolist()
    pks = group_pks[starts].tolist()
    trajectory_ids = trajectories.trajectory_id
    rewards = trajectories.reward
    passed = trajectories.passed.copy()  # corrected below
    corrected, corrected_passed = _corrections(rankings, pks, bounds, trajectory_ids)
    overridden = ~np.isnan(corrected)
    passed[overridden] = corrected_passed[overridden]
    # Positions and values gathered in lists and set at once: numpy's per-item writes cost
    # more than the loop itself.
    ranked: list[int] = []
    rank_values: list[int] = []
    score_values: list[float] = []
    flagged_at: list[int] = []
    flags: dict[int, tuple[str, ...]] = {}
    unused: dict[int, str] = {}  # group position -> why its ranking could not be used
    flag_names = set(config.flag_names)
    passed_list = passed.tolist()
    for g, pk in enumerate(pks):
        final = rankings.get(pk)
        if final is None:
            continue
        start, end = bounds[g], bounds[g + 1]
        ids = trajectory_ids[start:end]
        if final.flags:
            flags.update((i, final.flags[tid]) for i, tid in enumerate(ids, start) if tid in final.flags)
        rank_of = final.ranks()
        reason = _unusable(final, rank_of, ids, passed_list[start:end], config)
        if reason:
            unused[g] = reason
            continue
        for i, tid in enumerate(ids, start):
            rank = rank_of.get(tid)
            if rank is None:
                continue
            ranked.append(i)
            rank_values.append(rank)
            if final.flags and flag_names.intersection(final.flags.get(tid, ())):
                flagged_at.append(i)
            if config.schedule == "scores":
                score_values.append(final.scores[tid])
    ranks = np.zeros(n, dtype=np.int64)
    ranks[ranked] = rank_values
    scores = np.full(n, np.nan)
    if config.schedule == "scores":
        scores[ranked] = score_values
    flagged = np.zeros(n, dtype=bool)
    flagged[flagged_at] = True
    use_flags = config.w_flag is not None and flagged.any()
    result = gagar_advantages(
        np.where(overridden, corrected, rewards), group_index, passed, ranks,
        schedule=config.schedule, params=config.params,
        scores=scores if config.schedule == "scores" else None,
        flagged=flagged if use_flags else None, w_flag=config.w_flag if use_flags else None,
        norm_by_std=config.norm_by_std, unbiased_std=config.unbiased_std, n_groups=len(pks),
    )
    source, reasons, grader, grader_version, ranking_version = [], [], [], [], []
    for g, (pk, reason) in enumerate(zip(pks, result.reason_names(), strict=True)):
        final = rankings.get(pk)
        if final is None:
            source.append("none")
            reasons.append("no_ranking")
            grader.append(None)
            grader_version.append(None)
            ranking_version.append(None)
            continue
        reason = unused.get(g, reason)
        source.append(final.source if reason == "redistributed" else "fallback")
        reasons.append(reason)
        grader.append(final.grader or None)
        grader_version.append(final.grader_version or None)
        ranking_version.append(_ranking_version(final))
    return AdvantageChunk(
        group_ids=[group_ids[pk] for pk in pks], group_index=group_index, trajectory_ids=trajectory_ids,
        reward=rewards, corrected_reward=corrected, passed=passed, grpo_advantage=result.grpo,
        factor=result.factors, rank=ranks, advantage=result.advantages, flags=flags,
        label=list(result.label_names()), source=source,
        source_reason=reasons, grader=grader, grader_version=grader_version, ranking_version=ranking_version,
    )


def _corrections(rankings: Mapping[int, FinalRanking], pks: list[int], bounds: list[int],
                 trajectory_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per trajectory, shape (n,): the corrected reward where its group's ranking overrode
    its test verdict, else NaN; and the verdict it was given (False where not overridden)."""
    corrected = np.full(len(trajectory_ids), np.nan)
    corrected_passed = np.zeros(len(trajectory_ids), dtype=bool)
    for g, pk in enumerate(pks):
        final = rankings.get(pk)
        if final is None or not final.verdicts:
            continue
        for i in range(bounds[g], bounds[g + 1]):
            verdict = final.verdicts.get(trajectory_ids[i])
            if verdict is not None:
                corrected[i] = corrected_reward(verdict["passed"])
                corrected_passed[i] = verdict["passed"]
    return corrected, corrected_passed


def _unusable(final: FinalRanking, rank_of: dict[str, int], ids: list[str], passed: list[bool],
              config: AdvantageConfig) -> str:
    """Why `final` cannot rank its group ("" if it can): it must rank exactly the passing
    trajectories and, for the scores schedule, score every one of them."""
    if set(rank_of) != {tid for tid, p in zip(ids, passed, strict=True) if p}:
        return RANKING_MISMATCH
    if config.schedule == "scores" and not (
            final.scores and all(math.isfinite(final.scores.get(t, math.nan)) for t in rank_of)):
        return MISSING_SCORES
    return ""


def _ranking_version(final: FinalRanking) -> str | None:
    """Which ranking it is: a human one by its version in the group's annotation history, a
    grader's by its grading id; an unsaved one (the editor's preview) has none."""
    if final.source == "human":
        return f"annotation:{final.version}"
    if final.source == "grader":
        return f"grading:{final.grading_id}"
    return None


@dataclass(frozen=True)
class AdvantageHistogram:
    """Counts per bin, shared edges (len(counts) + 1), for GRPO and redistributed advantages."""

    edges: list[float]
    before: list[int]
    after: list[int]
    n: int


class MixedAdvantages:
    """The advantages of the mixed groups' trajectories, before (`grpo_advantage`) and after
    (`advantage`) redistribution, gathered a chunk at a time (the other groups' advantages are
    all zero): only those two columns of the mixed trajectories are kept, so a batch's chunks
    can stream through it."""

    def __init__(self) -> None:
        self.before: list[np.ndarray] = []
        self.after: list[np.ndarray] = []

    def add(self, chunk: AdvantageChunk) -> None:
        mixed = np.asarray([label == "mixed" for label in chunk.label], dtype=bool)[chunk.group_index]
        self.before.append(chunk.grpo_advantage[mixed])
        self.after.append(chunk.advantage[mixed])

    def histogram(self, *, bins: int = 16) -> AdvantageHistogram:
        """Their distribution, before and after, over shared edges."""
        before = np.concatenate(self.before) if self.before else np.zeros(0)
        after = np.concatenate(self.after) if self.after else np.zeros(0)
        if not before.size:
            return AdvantageHistogram(edges=[], before=[], after=[], n=0)
        low = float(min(before.min(), after.min()))
        high = float(max(before.max(), after.max()))
        if high - low < 1e-9:
            low, high = low - 0.5, high + 0.5
        edges = np.linspace(low, high, bins + 1)
        return AdvantageHistogram(
            edges=edges.tolist(),
            before=np.histogram(before, edges)[0].tolist(),
            after=np.histogram(after, edges)[0].tolist(),
            n=int(before.size),
        )
