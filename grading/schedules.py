"""Weight schedules: from a ranking of the passing trajectories to factors in (0, 1].

A schedule is a function ``factor(ranking, *, param=default, ...)`` that returns
one factor per ranked trajectory (shape (k,), in ``ranking.index`` order),
registered by name with a validator per parameter. ``grading.advantages``
applies them to a batch (``schedule_factors``) and re-exports this registry.
Positional schedules give a tie spanning positions r..r+k-1 the mean of f over
those positions, in closed form, so nothing here sorts or loops over groups.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np


def as_ranks(ranks, n: int) -> np.ndarray:
    """``ranks`` (n,) of whole numbers >= 1 as an intp array, where a trajectory not ranked (a
    failing one, or one the ranking leaves out) may be 0, None or NaN (pandas' missing value):
    all three become 0."""
    a = np.asarray(ranks)
    if a.dtype.kind in "OUS" and a.shape == (n,):  # a list holding None for the unranked, or text
        if not all(r is None or isinstance(r, numbers.Real) for r in a.tolist()):
            raise ValueError(f"ranks must be numbers, or None for a trajectory not ranked (shape ({n},))")
        a = np.array([np.nan if r is None else r for r in a.tolist()], dtype=np.float64)
    if a.shape != (n,) or (a.size and a.dtype.kind not in "iuf"):
        raise ValueError(f"ranks must be a numeric array of shape ({n},)")
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), 0.0, a)
        if not np.all(np.isfinite(a) & (np.floor(a) == a)):
            raise ValueError("ranks must be whole numbers (0, None or NaN: not ranked)")
    if a.size and a.min() < 0:
        raise ValueError("ranks must be >= 0 (0, None or NaN: not ranked)")
    return a.astype(np.intp, copy=False)


_NOT_COMPETITION = "ranks must be standard competition ranks per group (1, 2, 2, 4)"


class Ranking:
    """The ranked trajectories of a batch, as schedules see them.

    ``ranks``: (n,) standard competition ranks per group (1, 2, 2, 4), 0 = not
    ranked; ``group_index``: intp (n,) in 0..n_groups-1; ``scores``: float (n,) or
    None. Attributes of shape (k,), one per ranked trajectory in batch order:
    ``index`` into the batch, ``group``, ``rank``, ``tie`` (how many share the
    rank in the group), ``m`` (how many are ranked in the group); ``dense``
    (dense rank) and ``scores`` on demand. ``n_ranked``: (n_groups,); ``n``: the
    batch size.
    """

    def __init__(self, ranks, group_index: np.ndarray, n_groups: int, scores=None):
        n = self.n = group_index.size
        ranks = as_ranks(ranks, n)
        self.n_groups = n_groups
        self.index = np.flatnonzero(ranks > 0)
        self.group = np.take(group_index, self.index)
        self.rank = np.take(ranks, self.index)
        self.n_ranked = np.bincount(self.group, minlength=n_groups)
        # Group g owns n_ranked[g] consecutive slots, one per possible rank, so
        # ties are counted with one bincount, no sort. Ranks are competition
        # ranks iff every occupied slot s has exactly s trajectories in earlier
        # slots (each group fills its own slots; a rank > m spills and fails).
        k = self.index.size
        self._start = np.take(np.cumsum(self.n_ranked) - self.n_ranked, self.group)
        self._slot = self._start + self.rank - 1
        if k and self._slot.max() >= k:  # before bincount sizes its counts by the largest rank
            raise ValueError(_NOT_COMPETITION)
        self._per_slot = np.bincount(self._slot, minlength=k)
        ahead = np.cumsum(self._per_slot) - self._per_slot
        if np.any((ahead != np.arange(k)) & (self._per_slot > 0)):
            raise ValueError(_NOT_COMPETITION)
        self._scores = None if scores is None else np.asarray(scores, dtype=np.float64)
        if self._scores is not None and self._scores.shape != (n,):
            raise ValueError(f"scores must have shape ({n},), got {self._scores.shape}")

    @cached_property
    def m(self) -> np.ndarray:
        return np.take(self.n_ranked, self.group)

    @cached_property
    def tie(self) -> np.ndarray:
        return np.take(self._per_slot, self._slot)

    @cached_property
    def dense(self) -> np.ndarray:
        distinct = np.concatenate(([0], np.cumsum(self._per_slot > 0)))
        return distinct[self._slot + 1] - distinct[self._start]

    @cached_property
    def scores(self) -> np.ndarray:
        if self._scores is None:
            raise ValueError("this schedule needs the grader's scores")
        s = self._scores[self.index]
        if not np.all(np.isfinite(s)):
            raise ValueError("scores of ranked trajectories must be finite")
        return s


@dataclass(frozen=True)
class Schedule:
    """A registered schedule: ``factor(ranking, **params) -> (k,)`` and its parameters."""

    name: str
    factor: Callable[..., np.ndarray]
    checks: Mapping[str, Callable[[str, Any], Any]]
    defaults: Mapping[str, Any]

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Validated parameters with defaults filled, sorted by name."""
        unknown = sorted(set(params) - set(self.checks))
        missing = sorted(set(self.checks) - set(params) - set(self.defaults))
        if unknown or missing:
            raise ValueError(
                f"schedule {self.name!r}: unknown {unknown}, missing {missing}; "
                f"parameters are {sorted(self.checks)}"
            )
        merged = {**self.defaults, **params}
        try:
            return {k: self.checks[k](k, merged[k]) for k in sorted(merged)}
        except ValueError as e:
            raise ValueError(f"schedule {self.name!r}: {e}") from None


SCHEDULES: dict[str, Schedule] = {}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {}


def register_schedule(name: str, **checks: Callable[[str, Any], Any]):
    """Register ``factor(ranking, *, p1=default, ...)`` under ``name``.

    ``checks`` maps each keyword-only parameter to a validator that returns the
    canonical value or raises ValueError; defaults come from the signature and a
    parameter without one is required.
    """
    if name in SCHEDULES:
        raise ValueError(f"schedule {name!r} is already registered")

    def decorator(factor):
        sig = inspect.signature(factor).parameters.values()
        kwonly = {p.name: p.default for p in sig if p.kind is p.KEYWORD_ONLY}
        if set(kwonly) != set(checks):
            raise ValueError(f"schedule {name!r}: checks must cover exactly {sorted(kwonly)}")
        defaults = {k: v for k, v in kwonly.items() if v is not inspect.Parameter.empty}
        SCHEDULES[name] = Schedule(name, factor, dict(checks), defaults)
        DEFAULT_PARAMS[name] = dict(sorted(defaults.items()))
        return factor

    return decorator


def get_schedule(name: str) -> Schedule:
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; known: {sorted(SCHEDULES)}")
    return SCHEDULES[name]


def describe_schedule(name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Canonical, JSON-ready config: ``{"name": ..., "params": {sorted, defaults filled}}``."""
    return {"name": name, "params": get_schedule(name).resolve(params or {})}


def real(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name} must be a number, got {v!r}")
    return float(v)


def unit(name: str, v) -> float:
    v = real(name, v)
    if not 0 < v <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {v}")
    return v


def cap(name: str, v) -> float:
    """A flag cap: unlike a schedule's factors it may be 0, which takes a flagged
    trajectory out of its group's share of the positive advantage."""
    v = real(name, v)
    if not 0 <= v <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {v}")
    return v


def positive(name: str, v) -> float:
    v = real(name, v)
    if not 0 < v < np.inf:
        raise ValueError(f"{name} must be a finite number > 0, got {v}")
    return v


def count(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    return int(v)


def tiers(name: str, v) -> list[float]:
    if isinstance(v, str | bytes) or not hasattr(v, "__len__") or len(v) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of factors, got {v!r}")
    values = [unit(name, x) for x in v]
    if any(a < b for a, b in zip(values, values[1:], strict=False)):
        raise ValueError(f"{name} must be non-increasing (a worse tier never weighs more)")
    return values


@register_schedule("linear", w_min=unit)
def linear(ranking: Ranking, *, w_min=0.5) -> np.ndarray:
    """f(p) = 1 - (1 - w_min)(p - 1)/(m - 1), 1 when m = 1; affine, so a tie gets
    f at the mean position it spans, r + (k - 1)/2."""
    half_step = (1 - w_min) / (2 * np.maximum(ranking.n_ranked - 1, 1))  # per group
    twice_offset = 2 * ranking.rank + ranking.tie - 3  # 2 * (mean position - 1)
    return 1 - np.take(half_step, ranking.group) * twice_offset


@register_schedule("exponential", gamma=unit)
def exponential(ranking: Ranking, *, gamma=0.8) -> np.ndarray:
    """f(p) = gamma**(p - 1); a tie of k from rank r gets the mean of that geometric run.
    For tiny gamma and deep ranks the factor can underflow to 0."""
    first = np.power(gamma, ranking.rank - 1.0)
    if gamma == 1:
        return first
    log_gamma = np.log(gamma)
    # expm1 keeps (1 - gamma**k) / (1 - gamma) exact when gamma is close to 1.
    return first * np.expm1(ranking.tie * log_gamma) / (ranking.tie * np.expm1(log_gamma))


@register_schedule("top_m", m=count, w_min=unit)
def top_m(ranking: Ranking, *, m, w_min=0.5) -> np.ndarray:
    """f(p) = 1 for p <= m else w_min; a tie straddling m mixes both by share."""
    full = np.clip(m - ranking.rank + 1, 0, ranking.tie)
    return (full + (ranking.tie - full) * w_min) / ranking.tie


@register_schedule("tiered", factors=tiers)
def tiered(ranking: Ranking, *, factors) -> np.ndarray:
    """Tier = dense rank, so ties share a tier (no position mean); beyond the list,
    the last factor. ``factors`` must be non-increasing."""
    table = np.asarray(factors, dtype=np.float64)
    return table[np.minimum(ranking.dense, table.size) - 1]


@register_schedule("scores", temperature=positive)
def scores(ranking: Ranking, *, temperature=1.0) -> np.ndarray:
    """f = exp((s - best s of the ranked in the group) / temperature). The grader's
    scores set the weights and ranks only say who is ranked, so factors follow the
    ranks only as far as the scores agree with them."""
    s = ranking.scores
    best = np.full(ranking.n_groups, -np.inf)
    np.maximum.at(best, ranking.group, s)
    return np.exp((s - best[ranking.group]) / temperature)
