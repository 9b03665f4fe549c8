"""Agreement between two rankings of the same trajectories, and over many groups.

A ranking is tiers, best first: ``(("b",), ("a", "c"))`` ranks b above a and
c, which are tied. Measures compare the items both rankings contain.

>>> kendall_tau([["a"], ["b"], ["c"]], [["a"], ["c"], ["b"]])
0.333...
>>> pairwise_accuracy(reference=[["a"], ["b", "c"]], predicted=[["b"], ["a"], ["c"]])
0.5
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import sqrt

import numpy as np

Tiers = Sequence[Sequence[str]]


def positions(tiers: Tiers) -> dict[str, int]:
    """Tier index of each item (0 = best); tied items share it."""
    return {item: index for index, tier in enumerate(tiers) for item in tier}


def _pairs(a: Tiers, b: Tiers) -> list[tuple[int, int]]:
    """Sign of each common pair's order in a and in b: -1, 0 (tied) or 1."""
    pa, pb = positions(a), positions(b)
    common = sorted(pa.keys() & pb.keys())
    return [
        (_sign(pa[x] - pa[y]), _sign(pb[x] - pb[y])) for x, y in combinations(common, 2)
    ]


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def kendall_tau(a: Tiers, b: Tiers) -> float | None:
    """Kendall's tau-b (ties in either ranking allowed); None when undefined:
    fewer than two common items, or one ranking ties them all."""
    pairs = _pairs(a, b)
    concordant_minus_discordant = sum(sa * sb for sa, sb in pairs)
    untied_a = sum(1 for sa, _ in pairs if sa)
    untied_b = sum(1 for _, sb in pairs if sb)
    if not untied_a or not untied_b:
        return None
    return concordant_minus_discordant / sqrt(untied_a * untied_b)


def pairwise_accuracy(*, reference: Tiers, predicted: Tiers) -> float | None:
    """Of the pairs the reference orders, the share the prediction orders the same
    way; a pair the prediction ties counts half. None if the reference orders none."""
    scores = [1.0 if sr == sp else 0.5 if sp == 0 else 0.0 for sr, sp in _pairs(reference, predicted) if sr]
    return sum(scores) / len(scores) if scores else None


def top1_agreement(*, reference: Tiers, predicted: Tiers) -> bool | None:
    """Whether the prediction's best tier contains one of the reference's best."""
    if not reference or not predicted:
        return None
    return bool(set(reference[0]) & set(predicted[0]))


def bootstrap_interval(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], float] = np.mean,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `statistic` over `values` (one per group)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return None
    rng = np.random.default_rng(seed)
    samples = data[rng.integers(0, data.size, size=(resamples, data.size))]
    stats = np.apply_along_axis(statistic, 1, samples) if statistic is not np.mean else samples.mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Estimate:
    value: float | None
    interval: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class AgreementSummary:
    kendall_tau: Estimate
    pairwise_accuracy: Estimate
    top1: Estimate


def summarise(pairs: Sequence[tuple[Tiers, Tiers]], *, seed: int = 0) -> AgreementSummary:
    """Mean agreement over (reference, predicted) rankings of many groups, with
    95% bootstrap intervals over groups. Groups where a measure is undefined are
    left out of that measure."""

    def estimate(values: list) -> Estimate:
        kept = [float(v) for v in values if v is not None]
        if not kept:
            return Estimate(None, None, 0)
        return Estimate(float(np.mean(kept)), bootstrap_interval(kept, seed=seed), len(kept))

    return AgreementSummary(
        kendall_tau=estimate([kendall_tau(ref, pred) for ref, pred in pairs]),
        pairwise_accuracy=estimate([pairwise_accuracy(reference=r, predicted=p) for r, p in pairs]),
        top1=estimate([top1_agreement(reference=r, predicted=p) for r, p in pairs]),
    )


@dataclass(frozen=True)
class Move:
    item: str
    before: int | None  # 1-based tier, None when absent
    after: int | None

    @property
    def change(self) -> int | None:
        """Positive when the item moved up (a better tier)."""
        if self.before is None or self.after is None:
            return None
        return self.before - self.after


def ranking_diff(before: Tiers, after: Tiers) -> list[Move]:
    """Where each item sat before and after, in the order of `after` then the dropped ones."""
    pa, pb = positions(before), positions(after)
    order = [item for tier in after for item in tier] + [i for tier in before for i in tier if i not in pb]
    return [
        Move(item, pa[item] + 1 if item in pa else None, pb[item] + 1 if item in pb else None)
        for item in order
    ]
