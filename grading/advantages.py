"""GRPO advantages, ranking weight factors and GAGAR's sum-preserving redistribution.

Every array is flat, one entry per trajectory (shape ``(n,)``), except per-group
results (shape ``(G,)``). ``group_index`` holds each trajectory's group as an
integer in ``0..G-1``, in any order; ``G`` is ``n_groups`` when given, else
``max(group_index) + 1``. A group with no trajectory gets the code ``EMPTY``
(-1) in ``labels`` and ``reasons``. Everything is float64 and vectorised with
segment operations (``bincount``, gathers, ``ufunc.at``): no sort, no Python
loop over groups or trajectories.

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
from typing import Any

import numpy as np

from grading.schedules import (
    DEFAULT_PARAMS,
    SCHEDULES,
    Ranking,
    Schedule,
    describe_schedule,
    get_schedule,
    register_schedule,
    unit,
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


def _groups(group_index, n_groups: int | None) -> tuple[np.ndarray, int]:
    g = np.asarray(group_index)
    if g.ndim != 1 or (g.size and g.dtype.kind not in "iu"):
        raise ValueError("group_index must be a 1-D integer array")
    g = g.astype(np.intp, copy=False)
    top = int(g.max()) + 1 if g.size else 0
    if g.size and g.min() < 0:
        raise ValueError("group_index must be >= 0")
    if n_groups is None:
        return g, top
    if top > n_groups:
        raise ValueError(f"group_index has {top - 1}, beyond n_groups={n_groups}")
    return g, int(n_groups)


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


def _sizes(g: np.ndarray, passed: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories and passing trajectories per group, in one bincount."""
    key = 2 * g
    key += passed
    both = np.bincount(key, minlength=2 * n_groups)
    n_pass = both[1::2]
    return both[::2] + n_pass, n_pass


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
    g, n_groups = _groups(group_index, n_groups)
    return _labels(*_sizes(g, _bools(passed, g.size, "passed"), n_groups))


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
    g, n_groups = _groups(group_index, n_groups)
    size = np.bincount(g, minlength=n_groups)
    return _grpo(rewards, g, size, norm_by_std, unbiased_std, eps, verl_singletons)


def _grpo(rewards, g, size, norm_by_std, unbiased_std, eps, verl_singletons) -> np.ndarray:
    r = _floats(rewards, g.size, "rewards")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    with np.errstate(invalid="ignore", divide="ignore"):  # empty groups: never gathered
        mean = np.bincount(g, weights=r, minlength=size.size) / size
        if verl_singletons:
            mean[size == 1] = 0.0
        # In place from here: at a million rows, memory traffic is the cost.
        dev = np.take(mean, g)
        np.subtract(r, dev, out=dev)
        if not norm_by_std:
            return dev
        scratch = np.multiply(dev, dev)
        ddof = 1 if unbiased_std else 0
        var = np.bincount(g, weights=scratch, minlength=size.size) / (size - ddof)
    std = np.sqrt(np.where(size > ddof, var, 0.0))
    if verl_singletons:
        std[size == 1] = 1.0
    np.take(std + eps, g, out=scratch)
    return np.divide(dev, scratch, out=dev)


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
    trajectory's factor is capped at ``w_flag`` in (0, 1]. ``params``: the
    schedule's parameters (see ``DEFAULT_PARAMS``, ``describe_schedule``).
    Factors are in (0, 1] for ranked trajectories and NaN for the others.
    """
    g, n_groups = _groups(group_index, n_groups)
    return _factors(name, params, Ranking(ranks, g, n_groups, scores), flagged, w_flag)


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
            factors[hit] = np.minimum(factors[hit], unit("w_flag", w_flag))
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
    within 1e-12 relative to their max (``equal_factors``).
    """
    g, n_groups = _groups(group_index, n_groups)
    a = _floats(advantages, g.size, "advantages")
    passed = _bools(passed, g.size, "passed")
    w = _floats(factors, g.size, "factors")
    if np.any(w < 0) or np.any(w > 1):
        raise ValueError("factors must be in [0, 1] (NaN = not ranked)")
    unranked = np.bincount(np.take(g, np.flatnonzero(passed & np.isnan(w))), minlength=n_groups)
    j = np.flatnonzero(passed & (a > 0))
    size = np.bincount(g, minlength=n_groups)
    return _rescale(a, size, unranked, j, np.take(g, j), np.take(a, j), np.take(w, j))


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
    with np.errstate(invalid="ignore", divide="ignore"):  # read for redistributed groups only
        scale = total / weighted
    moved = np.flatnonzero(np.take(reasons, gj) == _REDISTRIBUTED)
    out = a.copy()
    out[np.take(j, moved)] = np.take(aw, moved) * np.take(scale, np.take(gj, moved))
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
    g, n_groups = _groups(group_index, n_groups)
    passed = _bools(passed, g.size, "passed")
    ranking = Ranking(ranks, g, n_groups, scores)
    if not np.all(passed[ranking.index]):
        raise ValueError("only passing trajectories can be ranked")
    size, n_pass = _sizes(g, passed, n_groups)
    grpo = _grpo(rewards, g, size, norm_by_std, unbiased_std, eps, verl_singletons)
    factors = _factors(schedule, params or {}, ranking, flagged, w_flag)
    # Every group that can be redistributed has all its passes ranked, so J is
    # found among the ranked trajectories, a fraction of the batch.
    a_ranked = np.take(grpo, ranking.index)
    positive = np.flatnonzero(a_ranked > 0)
    j = np.take(ranking.index, positive)
    moved = _rescale(grpo, size, n_pass - ranking.n_ranked, j, np.take(ranking.group, positive),
                     np.take(a_ranked, positive), np.take(factors, j))
    return GagarResult(grpo, factors, moved.advantages, _labels(size, n_pass), moved.reasons)
