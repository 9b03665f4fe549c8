"""What the run charts (webapp/runs/charts.py) and the audit dashboard's (webapp/audit/charts.py)
share: round axis ticks and bar labels shortened where they agree, not where they differ.

A tick at a raw data value (0.4397) makes a reader do arithmetic; a label cut at a fixed length
cuts exactly where versions that share a long prefix differ.
"""

from __future__ import annotations

import math

NICE = (1.0, 2.0, 2.5, 5.0, 10.0)
BOUNDARY = " -_·/:.,"  # a shared prefix is dropped up to one of these, not mid-word


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` ticks at round values (1, 2, 2.5 or 5 times a power of ten) from at or below
    `low` to at or above `high`; the axis spans the first to the last.

    >>> nice_ticks(0.0, 0.4397)
    [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    >>> nice_ticks(-1.0, 1.0)
    [-1.0, -0.5, 0.0, 0.5, 1.0]
    """
    if not high > low:
        low, high = (low - 1, low + 1) if low else (0.0, 1.0)
    power = 10.0 ** math.floor(math.log10((high - low) / max(count - 1, 1)))
    best = None
    for step in (n * power * scale for scale in (0.1, 1, 10) for n in NICE):
        first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        if not count - 1 <= last - first + 1 <= count + 2:
            continue
        # The least axis wasted beyond the data, then the count asked for; 2.5 only where it
        # saves a good deal (counts read badly as 2.5, 5, 7.5).
        waste = (last - first) * step / (high - low) - 1 + (0.1 if step / power in (0.25, 2.5, 25) else 0)
        score = (round(waste, 3), abs(last - first + 1 - count))
        if best is None or score < best[0]:
            best = (score, step, first, last)
    _, step, first, last = best
    digits = decimals(step)
    return [round(i * step, digits + 1) + 0.0 for i in range(first, last + 1)]  # + 0.0: no "-0"


def decimals(step: float) -> int:
    """The decimals that tell ticks `step` apart: 0.25 needs 2, 0.1 one, 5 none."""
    for digits in range(0, 10):
        if abs(round(step, digits) - step) < step * 1e-6:
            return digits
    return 10


def tick_text(value: float, step: float, unit: str = "") -> str:
    """A tick's label with the decimals its step needs and no more (0.5, not 0.5000; 1, not 1.0)."""
    text = f"{value:.{decimals(step)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        text = "0"
    if abs(value) >= 10_000:
        text = f"{value:,.0f}".replace(",", "\u202f")  # a thin space groups thousands
    return text + unit


def distinct_labels(labels: list[str], limit: int) -> list[str]:
    """Each label within `limit` characters, shortened where the labels agree: a prefix they all
    share is dropped (from its start to a word boundary, as far as needed) and a label still too
    long loses its middle, so "heuristic-1-678aaa9a · correct first" and "... · correct last"
    keep their ends apart.

    >>> distinct_labels(["version-abcdef-1 · top-1", "version-abcdef-1 · pairwise"], 12)
    ['…1 · top-1', '…pairwise']
    """
    prefix = _shared_prefix(labels) if len(set(labels)) > 1 else 0
    out = []
    for label in labels:
        if len(label) > limit and prefix:  # as much of the shared part as fits, from a word on
            start = next((i for i in range(max(len(label) - limit + 1, 1), prefix)
                          if label[i - 1] in BOUNDARY and label[i] not in BOUNDARY), prefix)
            label = "…" + label[start:]
        if len(label) > limit:  # the middle goes, more of the end kept: a measure's name is there
            label = label.removeprefix("…")
            head = (limit - 1) * 2 // 5
            label = label[:head] + "…" + label[len(label) - (limit - 1 - head):]
        out.append(label)
    return out


def _shared_prefix(labels: list[str]) -> int:
    """The length of the prefix every label shares, cut back to just after a word boundary."""
    n = len(min(labels, key=len))
    shared = next((i for i in range(n) if len({label[i] for label in labels}) > 1), n)
    while shared and labels[0][shared - 1] not in BOUNDARY:
        shared -= 1
    return shared
