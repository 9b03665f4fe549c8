"""Audit sets: the groups a person re-checks, drawn uniformly or stratified, reproducibly.

Candidates are groups with features (grader confidence, score margin, heuristic-vs-agentic
disagreement, patch size, pass rate). A stratified draw splits them by quantile bins of one
feature, gives each stratum a quota proportional to its size (largest remainder), and draws
each quota uniformly with a seed. The same candidates, size, feature, bins and seed give the
same set whatever order the candidates come in. docs/audit.md describes the design.

>>> size_for_interval(0.05)
385
"""

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, isfinite
from statistics import NormalDist

import numpy as np

STRATA = ("confidence", "margin", "disagreement", "patch_size", "pass_rate")
UNKNOWN = "unknown"  # the stratum of candidates without a value for the feature
EVERYTHING = "all"  # the one stratum of a uniform draw


@dataclass(frozen=True)
class AuditCandidate:
    group_key: str
    features: Mapping[str, float | None]  # a feature absent or None puts the group in UNKNOWN


@dataclass(frozen=True)
class Stratum:
    label: str  # "0.2 to 0.45" (the values it holds), UNKNOWN or EVERYTHING
    low: float | None  # the smallest and largest feature value in it; None for UNKNOWN and EVERYTHING
    high: float | None
    keys: tuple[str, ...]  # its group keys, sorted
    quota: int

    @property
    def population(self) -> int:
        return len(self.keys)


def quotas(
    candidates: Sequence[AuditCandidate], *, size: int, stratify_by: str | None, bins: int = 4
) -> list[Stratum]:
    """The strata and how many groups to draw from each, lowest values first, UNKNOWN last.

    Quotas are proportional to the strata's sizes: each gets the whole part of
    size * population / total, and the groups left over go one each to the strata with
    the largest fractional parts (ties to the earlier stratum). They sum to `size` exactly.
    """
    _check(candidates, size=size, stratify_by=stratify_by, bins=bins)
    parts = _partition(candidates, stratify_by, bins)
    shares = [Fraction(size * len(keys), len(candidates)) for _, _, _, keys in parts]
    counts = [int(share) for share in shares]
    by_remainder = sorted(range(len(parts)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in by_remainder[:size - sum(counts)]:
        counts[i] += 1
    return [Stratum(*part, quota=count) for part, count in zip(parts, counts, strict=True)]


def sample_audit_set(
    candidates: Sequence[AuditCandidate], *, size: int, stratify_by: str | None, seed: int, bins: int = 4
) -> list[str]:
    """`size` group keys, sorted: uniformly when `stratify_by` is None, else each stratum's
    quota (see `quotas`) drawn uniformly from it. Each stratum is shuffled by its own seeded
    generator and its quota taken from the front, so a larger audit under the same seed and
    strata keeps every group a smaller one drew."""
    drawn = []
    for stratum in quotas(candidates, size=size, stratify_by=stratify_by, bins=bins):
        order = list(stratum.keys)
        random.Random(f"{seed}/{stratum.label}").shuffle(order)
        drawn += order[:stratum.quota]
    return sorted(drawn)


def size_for_interval(
    half_width: float, *, confidence: float = 0.95, p: float = 0.5, population: int | None = None
) -> int:
    """How many groups to audit so that a proportion (top-1 agreement, the share of correct
    verdicts) is known to +-`half_width` at `confidence`, by the normal approximation:
    n0 = z^2 p (1 - p) / half_width^2, with z the two-sided normal quantile. p = 0.5 is the
    worst case. With a finite `population` of N groups, n = n0 / (1 + (n0 - 1) / N). Rounded
    up. A proportional stratified draw is at least as precise, so the size holds for it too.

    >>> size_for_interval(0.05, population=1000)
    278
    """
    if not 0 < half_width < 1:
        raise ValueError(f"half_width must lie strictly between 0 and 1, got {half_width}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if not 0 < p < 1:
        raise ValueError(f"p must lie strictly between 0 and 1, got {p}")
    if population is not None and population < 1:
        raise ValueError(f"population must be at least 1, got {population}")
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    n = z**2 * p * (1 - p) / half_width**2
    if population is not None:
        n = n / (1 + (n - 1) / population)
    return min(ceil(n), population) if population is not None else ceil(n)


def _check(candidates: Sequence[AuditCandidate], *, size: int, stratify_by: str | None, bins: int) -> None:
    if stratify_by is not None and stratify_by not in STRATA:
        raise ValueError(f"unknown stratum {stratify_by!r}: choose one of {', '.join(STRATA)}")
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    if size > len(candidates):
        raise ValueError(f"asked for {size} groups but there are only {len(candidates)} candidates")
    keys = [c.group_key for c in candidates]
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"group keys appear more than once: {', '.join(twice[:5])}")
    if stratify_by is not None:
        for c in candidates:
            value = c.features.get(stratify_by)
            if value is not None and not isfinite(value):
                raise ValueError(f"group {c.group_key}: {stratify_by} is {value}, not a finite number")


def _partition(
    candidates: Sequence[AuditCandidate], stratify_by: str | None, bins: int
) -> list[tuple[str, float | None, float | None, tuple[str, ...]]]:
    """(label, low, high, sorted keys) of each non-empty stratum. Bin edges are the
    feature's quantiles at 1/bins, 2/bins, ...; a value equal to an edge goes to the upper
    bin, so equal values always share a stratum and a heavily tied feature gives fewer bins."""
    ordered = sorted(candidates, key=lambda c: c.group_key)
    if stratify_by is None:
        return [(EVERYTHING, None, None, tuple(c.group_key for c in ordered))]
    known = [(c.group_key, float(c.features[stratify_by])) for c in ordered if c.features.get(stratify_by) is not None]
    unknown = tuple(c.group_key for c in ordered if c.features.get(stratify_by) is None)
    parts = []
    if known:
        values = np.array([value for _, value in known])
        edges = np.quantile(values, [k / bins for k in range(1, bins)])
        index = np.searchsorted(edges, values, side="right")
        for b in range(bins):
            inside = [known[i] for i in np.flatnonzero(index == b)]
            if inside:
                low, high = min(v for _, v in inside), max(v for _, v in inside)
                parts.append((f"{low:g} to {high:g}", low, high, tuple(key for key, _ in inside)))
    if unknown:
        parts.append((UNKNOWN, None, None, unknown))
    return parts
