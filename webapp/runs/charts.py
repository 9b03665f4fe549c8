"""Server-rendered SVG line charts over a run's steps: one line per series, x = step number.

Readable without JavaScript. Hovering a column of the plot shows the numbers of every series at
its step (an SVG <title>), and on the run page the column links to its step's batch page with
the chart's filter. Past MAX_COLUMNS steps a column holds several consecutive steps, says
each series' lowest and highest value over them and links to the first; past MAX_POINTS a
line keeps, per run of consecutive steps, its lowest and highest point (a spike stays
visible); the table view and the CSV hold every step's numbers. A step where the advantage
config changed is marked by a dashed line that says what changed. Every text is escaped (run
names and labels are user-supplied); styles come from classes (static/css/runs.css): the
content security policy refuses style attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH = 720
LEFT, RIGHT = 56, WIDTH - 16
TOP, BOTTOM = 30, 170  # the plot area
LEGEND_ROW = 16
MAX_COLUMNS = 200
MAX_POINTS = 200  # runs of steps per line, each drawn as its lowest and highest point
DOTS_UP_TO = 60  # steps; more, and the line alone is drawn
COLOURS = 8  # series classes run-series-0 .. 7


@dataclass(frozen=True)
class Series:
    label: str
    values: list[float | None]  # one per step of the chart, None where it has none
    links: list[str | None] | None = None  # per step: the page a click opens


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:.4g}{unit}"


def step_chart(*, title: str, desc: str, steps: list[int], series: list[Series], low: float | None = None,
               high: float | None = None, unit: str = "", markers: list[tuple[int, str]] = ()) -> SafeString:
    """A chart of `series` over `steps` (ascending step numbers); `low`/`high` fix the y axis's
    ends (else the data's); `markers`: (step, what happened there). Built as plain strings: a
    run of a thousand steps draws tens of thousands of numbers per page."""
    values = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    lo = min(values, default=0.0) if low is None else min(low, *values) if values else low
    hi = max(values, default=1.0) if high is None else max(high, *values) if values else high
    if hi - lo < 1e-12:
        lo, hi = (lo - 1, hi + 1) if lo else (0.0, 1.0)
    first, last = (steps[0], steps[-1]) if steps else (0, 1)
    span, scale = last - first, (BOTTOM - TOP) / (hi - lo)
    xs = [(LEFT + RIGHT) / 2] * len(steps) if not span else [LEFT + (RIGHT - LEFT) * (s - first) / span for s in steps]

    def x(step: int) -> float:
        return (LEFT + RIGHT) / 2 if not span else LEFT + (RIGHT - LEFT) * (step - first) / span

    def y(value: float) -> float:
        return BOTTOM - (value - lo) * scale

    legend_rows = math.ceil(len(series) / 3)
    height = BOTTOM + 24 + legend_rows * LEGEND_ROW
    parts = [_axes(lo, hi, unit, first, last, x, y)]
    for mark_step, text in markers:
        if first <= mark_step <= last:
            at = f"{x(mark_step):.1f}"
            parts.append(f'<line class="run-marker" x1="{at}" x2="{at}" y1="{TOP}" y2="{BOTTOM}">'
                         f"<title>step {mark_step}: {escape(text)}</title></line>")
    for i, s in enumerate(series):
        parts.append(_line(s, i, xs, y))
    parts.append(_columns(steps, xs, series, unit))
    for i, s in enumerate(series):  # above the columns: a dot is a line's own point and link
        parts.append(_dots(s, i, steps, xs, y, unit, every=len(steps) <= DOTS_UP_TO))
    for i, s in enumerate(series):
        lx, ly = LEFT + (i % 3) * 220, BOTTOM + 36 + (i // 3) * LEGEND_ROW
        parts.append(f'<rect class="run-swatch run-series-{i % COLOURS}" x="{lx}" y="{ly - 8}" width="14" height="4"/>'
                     f'<text class="run-legend" x="{lx + 18}" y="{ly - 3}">{escape(_short(s.label, 34))}</text>')
    return mark_safe(  # noqa: S308 - every text above is escaped
        f'<svg class="run-chart" viewBox="0 0 {WIDTH} {height}" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'data-steps="{len(steps)}"><title>{escape(title)}</title><desc>{escape(desc)}</desc>'
        f'<text class="run-chart-title" x="{LEFT}" y="16">{escape(title)}</text>{"".join(parts)}</svg>')


def _axes(lo, hi, unit, first, last, x, y) -> str:
    out = []
    for tick in (lo, (lo + hi) / 2, hi):
        at = f"{y(tick):.1f}"
        out.append(f'<line class="run-grid" x1="{LEFT}" x2="{RIGHT}" y1="{at}" y2="{at}"/>'
                   f'<text class="run-tick" x="{LEFT - 4}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                   f"{escape(number(tick, unit))}</text>")
    if lo < 0 < hi:
        out.append(f'<line class="run-zero" x1="{LEFT}" x2="{RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}"/>')
    ticks = [first] if first == last else [first, (first + last) // 2, last] if last - first > 1 else [first, last]
    for step in ticks:
        out.append(f'<text class="run-tick" x="{x(step):.1f}" y="{BOTTOM + 14}" text-anchor="middle">{step}</text>')
    out.append(f'<text class="run-tick" x="{RIGHT}" y="{BOTTOM + 26}" text-anchor="end">step</text>')
    return "".join(out)


def _line(s: Series, i: int, xs: list[float], y) -> str:
    """The series as polylines, broken where it has no value."""
    runs, run = [], []
    for px, value in _decimated(xs, s.values):
        if value is None:
            if run:
                runs.append(run)
            run = []
        else:
            run.append(f"{px:.1f},{y(value):.1f}")
    if run:
        runs.append(run)
    return "".join(f'<polyline class="run-line run-series-{i % COLOURS}" points="{" ".join(points)}"/>'
                   for points in runs if len(points) > 1)


def _dots(s: Series, i: int, steps: list[int], xs: list[float], y, unit: str, *, every: bool) -> str:
    """A dot per step with a value when the steps are few (`every`), else only for a value alone
    between gaps, which no line shows; each says its number and, where the series gives one,
    links to its step's batch page with the series' own filter."""
    values = s.values
    if not every and None not in values:
        return ""
    out = []
    for n, (step, px, value) in enumerate(zip(steps, xs, values, strict=True)):
        if value is None:
            continue
        alone = (n == 0 or values[n - 1] is None) and (n == len(steps) - 1 or values[n + 1] is None)
        if not (every or alone):
            continue
        dot = (f'<circle class="run-dot run-series-{i % COLOURS}" cx="{px:.1f}" cy="{y(value):.1f}" r="3.5">'
               f"<title>step {step}: {escape(s.label)} {number(value, unit)}</title></circle>")
        link = s.links[n] if s.links else None
        out.append(f'<a href="{link}" data-step="{step}">{dot}</a>' if link else dot)
    return "".join(out)


def _extremes(values: list[float | None], size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per run of `size` consecutive steps: the index of its lowest and of its highest value,
    and whether it has none."""
    a = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    pad = -len(a) % size
    rows = np.concatenate([a, np.full(pad, np.nan)]).reshape(-1, size)
    empty = np.isnan(rows).all(axis=1)
    base = np.arange(rows.shape[0]) * size
    low = base + np.where(np.isnan(rows), np.inf, rows).argmin(axis=1)
    high = base + np.where(np.isnan(rows), -np.inf, rows).argmax(axis=1)
    return low, high, empty


def _decimated(xs: list[float], values: list[float | None]) -> list[tuple[float, float | None]]:
    """(x, value) of every step, or past MAX_POINTS steps the lowest and highest of each run of
    consecutive steps, in their order (None where a whole run has no value)."""
    if len(xs) <= MAX_POINTS:
        return list(zip(xs, values, strict=True))
    size = math.ceil(len(xs) / MAX_POINTS)
    low, high, empty = _extremes(values, size)
    out = []
    for start, lo, hi, none in zip(range(0, len(xs), size), low.tolist(), high.tolist(), empty.tolist(),
                                   strict=True):
        if none:
            out.append((xs[start], None))
        else:
            out += [(xs[i], values[i]) for i in sorted({lo, hi})]
    return out


def _columns(steps: list[int], xs: list[float], series: list[Series], unit: str) -> str:
    """A transparent column per step (or per run of consecutive steps) holding the numbers,
    and, where the series give one, the link of its first step."""
    if not steps:
        return ""
    size = math.ceil(len(steps) / MAX_COLUMNS)
    labels = [escape(s.label) for s in series]
    links = next((s.links for s in series if s.links), None)
    if size == 1:
        texts = [[number(v, unit) for v in s.values] for s in series]
    else:  # each column's lowest and highest value of each series
        texts = []
        for s in series:
            low, high, empty = _extremes(s.values, size)
            texts.append(["—" if none else number(s.values[lo], unit) if s.values[lo] == s.values[hi]
                          else f"{number(s.values[lo], unit)} to {number(s.values[hi], unit)}"
                          for lo, hi, none in zip(low.tolist(), high.tolist(), empty.tolist(), strict=True)])
    out = []
    for column, start in enumerate(range(0, len(steps), size)):
        end = min(start + size, len(steps)) - 1
        left = LEFT if start == 0 else (xs[start - 1] + xs[start]) / 2
        right = RIGHT if end == len(steps) - 1 else (xs[end] + xs[end + 1]) / 2
        head = f"step {steps[start]}" if start == end else f"steps {steps[start]}–{steps[end]}"
        title = f"{head}: " + "; ".join(f"{label} {text[column]}" for label, text in zip(labels, texts, strict=True))
        rect = (f'<rect class="run-column" x="{left:.1f}" y="{TOP}" width="{max(right - left, 1):.1f}" '
                f'height="{BOTTOM - TOP}"><title>{title}</title></rect>')
        link = links[start] if links else None  # a number and the chart's own filter: nothing to escape
        out.append(f'<a href="{link}" data-step="{steps[start]}">{rect}</a>' if link else rect)
    return "".join(out)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
