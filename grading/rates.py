"""Rates with their intervals: a share of `n` and its 95% Wilson score interval."""

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # two-sided 95% normal quantile


@dataclass(frozen=True)
class Rate:
    """`count` of `n`, the share and its 95% Wilson interval (None when n is 0)."""

    label: str
    count: int
    n: int
    value: float | None
    interval: tuple[float, float] | None


def wilson(count: int, n: int, label: str = "") -> Rate:
    """count / n with its 95% Wilson score interval.

    >>> [round(x, 4) for x in wilson(4, 10).interval]
    [0.1682, 0.6873]
    """
    if not n:
        return Rate(label, count, n, None, None)
    p = count / n
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    return Rate(label, count, n, p, (max(0.0, centre - half), min(1.0, centre + half)))
