"""GRPO advantages, ranking weight factors and GAGAR's sum-preserving redistribution.

Every array is flat, one entry per trajectory (shape ``(n,)``), except per-group
results (shape ``(G,)``). ``group_index`` holds each trajectory's group as an
integer in ``0..G-1``, in any order; ``G`` is ``n_groups`` when given, else
``max(group_index) + 1``. A group with no trajectory gets the code ``EMPTY``
(-1) in ``labels`` and ``reasons``. Everything is float64 and vectorised with
segment operations (``bincount``, gathers, ``ufunc.at``): no sort, no Python
loop over groups or trajectories. A batch laid out as trainers lay it out, the k
trajectories of each group in a row (``group_index`` is ``repeat(arange(G), k)``),
is detected in one pass and its group sums are taken over a (G, k) view instead.

A ranking is given as ``ranks``: the standard competition rank of each ranked
(passing) trajectory inside its group, 1 = best, ties share a rank (1, 2, 2, 4),
and 0 for every trajectory that is not ranked. The weight schedules and their
registry live in ``grading.schedules`` and are re-exported here.

>>> r = gagar_advantages(rewards=[1.0, 1.0, 1.0, 0.0], group_index=[0, 0, 0, 0],
...                      passed=[True, True, True, False], ranks=[1, 2, 2, 0],
...                      schedule="linear", params={"w_min": 0.5})
>>> r.factors.tolist()
[1.0, 0.625, 0.625, nan]
>>> r.advantages.round(4).tolist()
[0.6667, 0.4167, 0.4167, -1.5]
>>> r.label_names(), r.reason_names()
(('mixed',), ('redistributed',))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from grading.schedules import (
    DEFAULT_PARAMS,
    SCHEDULES,
    Ranking,
    Schedule,
    cap,
    describe_schedule,
    get_schedule,
    register_schedule,
)

__all__ = [
    "DEFAULT_PARAMS", "EMPTY", "LABELS", "REASONS", "SCHEDULES", "GagarResult",
    "Redistribution", "Schedule", "describe_schedule", "gagar_advantages",
    "grpo_advantages", "group_labels", "redistribute", "register_schedule",
    "schedule_factors",
]

LABELS = ("mixed", "all_pass", "all_fail", "singleton")
REASONS = ("redistributed", "single_pass", "nonpositive_sum", "equal_factors", "no_ranking")
EMPTY = -1
EQUAL_FACTORS_RTOL = 1e-12
_MIXED, _ALL_PASS, _ALL_FAIL, _SINGLETON = range(4)
_REDISTRIBUTED, _SINGLE_PASS, _NONPOSITIVE_SUM, _EQUAL_FACTORS, _NO_RANKING = range(5)


def _names(codes: np.ndarray, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("empty" if c == EMPTY else names[c] for c in codes.tolist())


class _Groups:
    """Which group each trajectory is in, and per-group sums over the batch.

    ``index``: intp (n,) in ``0..n_groups-1``, validated. ``width`` is k when
    ``index`` equals ``np.repeat(np.arange(n_groups), k)``, the layout verl and
    TRL produce by repeating each prompt k times in a row, and 0 otherwise.
    Such a batch reshapes to (n_groups, k): its group sums are row sums (einsum,
    SIMD) instead of bincount's scatter, and a per-group value reaches each
    trajectory by ``np.repeat`` instead of a gather. Callers write one formula
    for both layouts; only these methods tell them apart.
    """

    def __init__(self, group_index, n_groups: int | None):
        g = np.asarray(group_index)
        if g.ndim != 1 or (g.size and g.dtype.kind not in "iu"):
            raise ValueError("group_index must be a 1-D integer array")
        g = self.index = g.astype(np.intp, copy=False)
        self.n = g.size
        # In that layout the last group comes last: its id + 1 is the count to try.
        last = int(g[-1]) + 1 if g.size else 0
        self.width = _run_width(g, last if n_groups is None else int(n_groups))
        if self.width:  # which also bounds g to 0..n_groups-1
            self.n_groups = g.size // self.width
            return
        top = int(g.max()) + 1 if g.size else 0
        if g.size and g.min() < 0:
            raise ValueError("group_index must be >= 0")
        if n_groups is not None and top > n_groups:
            raise ValueError(f"group_index has {top - 1}, beyond n_groups={n_groups}")
        self.n_groups = top if n_groups is None else int(n_groups)

    @cached_property
    def size(self) -> np.ndarray:
        """Trajectories per group, intp (G,)."""
        if self.width:
            return np.full(self.n_groups, self.width, dtype=np.intp)
        return np.bincount(self.index, minlength=self.n_groups)

    def tally(self, passed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Trajectories and passing trajectories per group, intp (G,) each."""
        if self.width:
            rows = passed.reshape(self.n_groups, self.width)
            return self.size, np.einsum("gk->g", rows, dtype=np.intp)
        key = 2 * self.index
        key += passed
        both = np.bincount(key, minlength=2 * self.n_groups)
        n_pass = both[1::2]
        return both[::2] + n_pass, n_pass

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Per-group sums of float (n,) values, float (G,)."""
        if self.width:
            return np.einsum("gk->g", values.reshape(self.n_groups, self.width))
        return np.bincount(self.index, weights=values, minlength=self.n_groups)

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        """Each trajectory's entry of a (G,) array, shape (n,)."""
        if self.width:
            return np.repeat(per_group, self.width)
        return np.take(per_group, self.index)


def _run_width(g: np.ndarray, n_groups: int) -> int:
    """k if ``g`` equals ``np.repeat(np.arange(n_groups), k)``, else 0. Reads g's first
    and last columns, then g once."""
    if not g.size or n_groups <= 0 or g.size % n_groups:
        return 0
    rows = g.reshape(n_groups, -1)
    firsts = np.arange(n_groups)
    # A non-decreasing g whose every row starts and ends at its own group
    # holds only that group in the row.
    if not (np.array_equal(rows[:, 0], firsts) and np.array_equal(rows[:, -1], firsts)):
        return 0
    return rows.shape[1] if np.all(g[1:] >= g[:-1]) else 0


def _floats(x, n: int, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
    return a


def _bools(x, n: int, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.shape != (n,) or (a.size and a.dtype != bool):
        raise ValueError(f"{name} must be a boolean array of shape ({n},)")
    return a.astype(bool, copy=False)


def _labels(size: np.ndarray, n_pass: np.ndarray) -> np.ndarray:
    return np.select(
        [size == 0, size == 1, n_pass == size, n_pass == 0],
        [EMPTY, _SINGLETON, _ALL_PASS, _ALL_FAIL],
        default=_MIXED,
    ).astype(np.int8)


def group_labels(passed, group_index, *, n_groups: int | None = None) -> np.ndarray:
    """Dynamic-sampling label of each group: int8 codes into ``LABELS``, shape (G,).

    ``passed``: bool (n,). A group of one trajectory is ``singleton`` whatever its
    outcome; a group with no trajectory is ``EMPTY`` (-1).
    """
    groups = _Groups(group_index, n_groups)
    return _labels(*groups.tally(_bools(passed, groups.n, "passed")))


def grpo_advantages(
    rewards,
    group_index,
    *,
    norm_by_std: bool = True,
    unbiased_std: bool = True,
    eps: float = 1e-6,
    n_groups: int | None = None,
    verl_singletons: bool = False,
) -> np.ndarray:
    """GRPO advantages ``(r - mean_g) / (std_g + eps)``, shape (n,).

    ``rewards``: float (n,). ``norm_by_std=False`` gives Dr. GRPO's ``r - mean_g``.
    ``unbiased_std`` picks the sample std (ddof=1, torch's default, as in verl
    and TRL) over the population std. The sample std of a single trajectory is
    undefined; it is taken as 0, so a singleton's advantage is exactly 0, like
    an all-pass or all-fail group's: one trajectory carries no relative signal.
    verl's ``compute_grpo_outcome_advantage`` instead gives a singleton mean 0
    and std 1, i.e. the advantage ``r / (1 + eps)`` (``r`` without std);
    ``verl_singletons=True`` reproduces that, for parity with a verl run.
    """
    groups = _Groups(group_index, n_groups)
    return _grpo(rewards, groups, groups.size, norm_by_std, unbiased_std, eps, verl_singletons)


def _grpo(rewards, groups: _Groups, size, norm_by_std, unbiased_std, eps, verl_singletons):
    r = _floats(rewards, groups.n, "rewards")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    with np.errstate(invalid="ignore", divide="ignore"):  # empty groups: never spread
        mean = groups.sum(r) / size
        if verl_singletons:
            mean[size == 1] = 0.0
        # In place from here: at a million rows, memory traffic is the cost.
        dev = groups.spread(mean)
        np.subtract(r, dev, out=dev)
        if not norm_by_std:
            return dev
        ddof = 1 if unbiased_std else 0
        var = groups.sum(np.square(dev)) / (size - ddof)
    std = np.sqrt(np.where(size > ddof, var, 0.0))
    if verl_singletons:
        std[size == 1] = 1.0
    std += eps
    return np.divide(dev, groups.spread(std), out=dev)


def schedule_factors(
    name: str,
    *,
    ranks,
    group_index,
    n_groups: int | None = None,
    scores=None,
    flagged=None,
    w_flag: float | None = None,
    **params,
) -> np.ndarray:
    """Weight factor of each trajectory under schedule ``name``, shape (n,).

    ``ranks``: (n,) competition ranks, 0 = not ranked. ``scores``: float (n,),
    for the ``scores`` schedule. ``flagged``: bool (n,); a flagged ranked
    trajectory's factor is capped at ``w_flag`` in [0, 1] (0: no share of the
    group's positive advantage, which the others then share). ``params``: the
    schedule's parameters (see ``DEFAULT_PARAMS``, ``describe_schedule``).
    Factors are in (0, 1] for ranked trajectories (a cap of 0 gives 0) and NaN
    for the others.
    """
    groups = _Groups(group_index, n_groups)
    return _factors(name, params, Ranking(ranks, groups.index, groups.n_groups, scores), flagged,
                    w_flag)


def _factors(name, params, ranking: Ranking, flagged, w_flag) -> np.ndarray:
    schedule = get_schedule(name)
    values = schedule.resolve(params)
    factors = np.full(ranking.n, np.nan)
    factors[ranking.index] = schedule.factor(ranking, **values)
    if flagged is not None:
        hit = np.flatnonzero(_bools(flagged, factors.size, "flagged"))
        if hit.size:
            if w_flag is None:
                raise ValueError("flagged trajectories need w_flag")
            factors[hit] = np.minimum(factors[hit], cap("w_flag", w_flag))
    return factors


@dataclass(frozen=True, eq=False)
class Redistribution:
    """``advantages`` float (n,); ``reasons`` int8 (G,) codes into ``REASONS``."""

    advantages: np.ndarray
    reasons: np.ndarray

    def reason_names(self) -> tuple[str, ...]:
        return _names(self.reasons, REASONS)


def redistribute(
    advantages, group_index, passed, factors, *, n_groups: int | None = None
) -> Redistribution:
    """GAGAR's zero-sum rescale of the positive passing advantages of each group.

    ``advantages``: float (n,) GRPO advantages; ``passed``: bool (n,); ``factors``:
    float (n,) in [0, 1], NaN = not ranked. With J = the passing trajectories of
    a group with advantage > 0 and S = sum_J A, each j in J gets
    ``A_j * w_j * S / sum_J(A_j * w_j)``; everything else keeps its advantage.
    A group is left bit-identical, with the first reason that applies, when: a
    passing trajectory is unranked (``no_ranking``); J is empty
    (``nonpositive_sum``: all-fail, all-pass, singleton; S > 0 whenever J is
    not empty); J has one member (``single_pass``); the factors in J are equal
    within 1e-12 relative to their max (``equal_factors``, which includes all
    of J capped at 0).
    """
    groups = _Groups(group_index, n_groups)
    g, n_groups = groups.index, groups.n_groups
    a = _floats(advantages, g.size, "advantages")
    passed = _bools(passed, g.size, "passed")
    w = _floats(factors, g.size, "factors")
    if np.any(w < 0) or np.any(w > 1):
        raise ValueError("factors must be in [0, 1] (NaN = not ranked)")
    unranked = np.bincount(np.take(g, np.flatnonzero(passed & np.isnan(w))), minlength=n_groups)
    j = np.flatnonzero(passed & (a > 0))
    return _rescale(a, groups.size, unranked, j, np.take(g, j), np.take(a, j), np.take(w, j))


def _rescale(a, size, unranked, j, gj, aj, wj) -> Redistribution:
    """``j``: indices of the passing trajectories with A > 0 (at least those of every
    group with ``unranked == 0``); ``gj``, ``aj``, ``wj``: their groups, advantages
    and factors."""
    n_j = np.bincount(gj, minlength=size.size)
    total = np.bincount(gj, weights=aj, minlength=size.size)
    aw = aj * wj
    weighted = np.bincount(gj, weights=aw, minlength=size.size)
    w_max = np.full(size.size, -np.inf)
    w_min = np.full(size.size, np.inf)
    with np.errstate(invalid="ignore"):  # NaN factors: such groups are no_ranking
        np.maximum.at(w_max, gj, wj)
        np.minimum.at(w_min, gj, wj)
    reasons = np.select(
        [size == 0, unranked > 0, n_j == 0, n_j == 1, w_max - w_min <= EQUAL_FACTORS_RTOL * w_max],
        [EMPTY, _NO_RANKING, _NONPOSITIVE_SUM, _SINGLE_PASS, _EQUAL_FACTORS],
        default=_REDISTRIBUTED,
    ).astype(np.int8)
    # Every j gets its rescaled advantage, then the groups left unchanged get
    # theirs back: most of J is redistributed in a real batch, so selecting the
    # rest is the shorter pass.
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN, inf: only in groups put back
        aw *= np.take(total / weighted, gj)
    out = a.copy()
    out[j] = aw
    kept = np.flatnonzero(np.take(reasons, gj) != _REDISTRIBUTED)
    out[np.take(j, kept)] = np.take(aj, kept)
    return Redistribution(out, reasons)


@dataclass(frozen=True, eq=False)
class GagarResult:
    """Per trajectory (n,): ``grpo``, ``factors`` (NaN = unranked), ``advantages``;
    per group (G,): ``labels`` (codes into LABELS), ``reasons`` (codes into REASONS)."""

    grpo: np.ndarray
    factors: np.ndarray
    advantages: np.ndarray
    labels: np.ndarray
    reasons: np.ndarray

    def label_names(self) -> tuple[str, ...]:
        return _names(self.labels, LABELS)

    def reason_names(self) -> tuple[str, ...]:
        return _names(self.reasons, REASONS)


def gagar_advantages(
    rewards,
    group_index,
    passed,
    ranks,
    *,
    schedule: str = "linear",
    params: Mapping[str, Any] | None = None,
    scores=None,
    flagged=None,
    w_flag: float | None = None,
    norm_by_std: bool = True,
    unbiased_std: bool = True,
    eps: float = 1e-6,
    n_groups: int | None = None,
    verl_singletons: bool = False,
) -> GagarResult:
    """GRPO, then factors from ``schedule``, then redistribution, in one call.

    Arguments as in ``grpo_advantages``, ``schedule_factors`` and
    ``redistribute``; only passing trajectories may be ranked. Same results as
    calling those three in turn, with the per-group counts shared.
    """
    groups = _Groups(group_index, n_groups)
    passed = _bools(passed, groups.n, "passed")
    ranking = Ranking(ranks, groups.index, groups.n_groups, scores)
    if not np.all(np.take(passed, ranking.index)):
        raise ValueError("only passing trajectories can be ranked")
    size, n_pass = groups.tally(passed)
    grpo = _grpo(rewards, groups, size, norm_by_std, unbiased_std, eps, verl_singletons)
    factors = _factors(schedule, params or {}, ranking, flagged, w_flag)
    # Every group that can be redistributed has all its passes ranked, so J is
    # found among the ranked trajectories, a fraction of the batch.
    a_ranked = np.take(grpo, ranking.index)
    positive = np.flatnonzero(a_ranked > 0)
    j = np.take(ranking.index, positive)
    moved = _rescale(grpo, size, n_pass - ranking.n_ranked, j, np.take(ranking.group, positive),
                     np.take(a_ranked, positive), np.take(factors, j))
    return GagarResult(grpo, factors, moved.advantages, _labels(size, n_pass), moved.reasons)
