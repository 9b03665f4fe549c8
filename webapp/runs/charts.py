"""Server-rendered SVG line charts over a run's steps: one line per series, x = step number.

Readable without JavaScript. A column of the plot holds the numbers of every series at its step
(an SVG <title>, which static/js/charts.js shows at once on hover, tap or keyboard focus), and on
the run page links to its step's batch page with the chart's filter. Past MAX_COLUMNS steps a
column holds several consecutive steps, says each series' lowest and highest value over them
and links to the first; past MAX_POINTS a line keeps, per run of consecutive steps, its lowest
and highest point (a spike stays visible); the table view and the CSV hold every step's
numbers. A step where the advantage config changed is marked by a dashed line that says what
changed. Every text is escaped (run
names and labels are user-supplied); styles come from classes (static/css/runs.css): the
content security policy refuses style attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from webapp.charts import nice_ticks, tick_text

# The viewBox is about the width a chart is drawn at on a 1280 px screen (two a row, static/css/
# runs.css), so that its 12.5-unit text is 12.5 px there and never shrinks below 12 px.
WIDTH = 580
LEFT, RIGHT = 52, WIDTH - 14
TOP, BOTTOM = 34, 190  # the plot area
LEGEND_ROW = 18
CHAR = 7.0  # the width of a character of the charts' 12.5 px text, near enough to lay out labels
MAX_COLUMNS = 200
MAX_POINTS = 200  # runs of steps per line, each drawn as its lowest and highest point
DOTS_UP_TO = 60  # steps; more, and the line alone is drawn
COLOURS = 8  # series classes run-series-0 .. 7
DASHES = 7  # dash classes run-dash-0 (solid) .. 6
STRIDES = (1, 2, 5, 10, 20, 25, 50)  # the steps between x labels, times powers of ten past 50


@dataclass(frozen=True)
class Series:
    label: str
    values: list[float | None]  # one per step of the chart, None where it has none
    links: list[str | None] | None = None  # per step: the page a click opens
    colour: int | None = None  # its colour's class; None: its place among the series
    dash: int = 0  # its dash pattern's class: 0 solid


@dataclass(frozen=True)
class Key:
    """A legend entry: a colour, a dash pattern, or both (a series of its own)."""

    label: str
    colour: int | None = None  # None: drawn in the neutral grey, for a dash pattern alone
    dash: int = 0


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:.4g}{unit}"


def step_chart(*, title: str, desc: str, steps: list[int], series: list[Series], low: float | None = None,
               high: float | None = None, unit: str = "", markers: list[tuple[int, str]] = (),
               legend: list[Key] | None = None, note: str = "") -> SafeString:
    """A chart of `series` over `steps` (ascending step numbers); `low`/`high` fix the y axis's
    ends (else the data's, rounded out to the ticks'); `markers`: (step, what happened there);
    `legend`: its entries (else one per series); `note`: a line above the legend (how to read
    colours and dashes). Built as plain strings: a run of a thousand steps draws tens of
    thousands of numbers per page."""
    values = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    lo = min(values, default=0.0) if low is None else min(low, *values) if values else low
    hi = max(values, default=1.0) if high is None else max(high, *values) if values else high
    ticks = nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]
    first, last = (steps[0], steps[-1]) if steps else (0, 1)
    span, scale = last - first, (BOTTOM - TOP) / (hi - lo)
    xs = [(LEFT + RIGHT) / 2] * len(steps) if not span else [LEFT + (RIGHT - LEFT) * (s - first) / span for s in steps]

    def x(step: int) -> float:
        return (LEFT + RIGHT) / 2 if not span else LEFT + (RIGHT - LEFT) * (step - first) / span

    def y(value: float) -> float:
        return BOTTOM - (value - lo) * scale

    series = [s if s.colour is not None else Series(s.label, s.values, s.links, i, s.dash)
              for i, s in enumerate(series)]
    keys, legend_y = _legend(legend if legend is not None else [Key(s.label, s.colour, s.dash) for s in series],
                             BOTTOM + 42 + (LEGEND_ROW if note else 0))
    parts = [_axes(ticks, unit, first, last, x, y)]
    for mark_step, text in markers:
        if first <= mark_step <= last:
            at = f"{x(mark_step):.1f}"
            parts.append(f'<line class="run-marker" x1="{at}" x2="{at}" y1="{TOP}" y2="{BOTTOM}">'
                         f"<title>step {mark_step}: {escape(text)}</title></line>")
    for s in series:
        parts.append(_line(s, xs, y))
    parts.append(_columns(steps, xs, series, unit))
    for s in series:  # above the columns: a dot is a line's own point and link
        parts.append(_dots(s, steps, xs, y, unit, every=len(steps) <= DOTS_UP_TO))
    if note:
        parts.append(f'<text class="run-legend run-legend-note" x="{LEFT}" y="{BOTTOM + 42}">{escape(note)}</text>')
    parts.append(keys)
    return mark_safe(  # noqa: S308 - every text above is escaped
        f'<svg class="run-chart" viewBox="0 0 {WIDTH} {legend_y + 8}" role="group" '
        f'xmlns="http://www.w3.org/2000/svg" data-steps="{len(steps)}" aria-label="{escape(title)}">'
        f'<title>{escape(title)}</title><desc>{escape(desc)}</desc>'
        f'<text class="run-chart-title" x="{LEFT}" y="18">{escape(title)}</text>{"".join(parts)}</svg>')


def _legend(keys: list[Key], top: float) -> tuple[str, float]:
    """The legend's entries laid out in rows as wide as the plot, and the y below its last row."""
    out, lx, ly = [], LEFT, top
    for key in keys:
        text = _short(key.label, 40)
        width = 30 + len(text) * CHAR + 16
        if lx > LEFT and lx + width > RIGHT:
            lx, ly = LEFT, ly + LEGEND_ROW
        colour = "run-neutral" if key.colour is None else f"run-series-{key.colour % COLOURS}"
        out.append(f'<line class="run-swatch {colour} run-dash-{key.dash % DASHES}" x1="{lx}" x2="{lx + 24}" '
                   f'y1="{ly - 4}" y2="{ly - 4}"/><text class="run-legend" x="{lx + 30}" y="{ly}">'
                   f"{escape(text)}</text>")
        lx += width
    return "".join(out), ly


def _axes(ticks: list[float], unit: str, first: int, last: int, x, y) -> str:
    step = ticks[1] - ticks[0]
    out = []
    for tick in ticks:
        at = f"{y(tick):.1f}"
        out.append(f'<line class="{"run-zero" if tick == 0 and ticks[0] < 0 else "run-grid"}" x1="{LEFT}" '
                   f'x2="{RIGHT}" y1="{at}" y2="{at}"/><text class="run-tick run-tick-y" x="{LEFT - 5}" '
                   f'y="{y(tick) + 4:.1f}" text-anchor="end">{escape(tick_text(tick, step, unit))}</text>')
    for n in step_labels(first, last):
        out.append(f'<text class="run-tick run-tick-x" x="{x(n):.1f}" y="{BOTTOM + 17}" '
                   f'text-anchor="middle">{n}</text>')
    out.append(f'<text class="run-tick" x="{RIGHT}" y="{BOTTOM + 32}" text-anchor="end">step</text>')
    return "".join(out)


def step_labels(first: int, last: int) -> list[int]:
    """The steps the x axis labels: every one where their numbers fit side by side, else every
    2nd, 5th, 10th, ... (multiples of the stride), evenly spaced and never overlapping.

    >>> step_labels(1, 4)
    [1, 2, 3, 4]
    """
    if first == last:
        return [first]
    room = (RIGHT - LEFT) / (last - first)  # px per step
    width = len(str(max(abs(first), abs(last)))) * CHAR + 10
    stride = next(n * 10 ** k for k in range(12) for n in STRIDES if n * 10 ** k * room >= width)
    return [n for n in range(-(-first // stride) * stride, last + 1, stride)]


def _line(s: Series, xs: list[float], y) -> str:
    """The series as polylines, broken where it has no value: a step without one is a gap, not 0."""
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
    css = f"run-line run-series-{s.colour % COLOURS} run-dash-{s.dash % DASHES}"
    return "".join(f'<polyline class="{css}" points="{" ".join(points)}"/>' for points in runs if len(points) > 1)


def _dots(s: Series, steps: list[int], xs: list[float], y, unit: str, *, every: bool) -> str:
    """A dot per step with a value when the steps are few (`every`), else only for a value alone
    between gaps, which no line shows; each says its number and, where the series gives one,
    links to its step's batch page with the series' own filter. Out of the tab order: the
    columns carry the same numbers, one stop per chart (static/js/charts.js)."""
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
        dot = (f'<circle class="run-dot run-series-{s.colour % COLOURS}" cx="{px:.1f}" cy="{y(value):.1f}" r="4">'
               f"<title>step {step}\n{escape(s.label)} {number(value, unit)}</title></circle>")
        link = s.links[n] if s.links else None
        out.append(f'<a href="{link}" data-step="{step}" tabindex="-1">{dot}</a>' if link else dot)
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
    """A transparent column per step (or per run of consecutive steps) holding the numbers, a
    line each, and, where the series give one, the link of its first step. The first column is
    the chart's one stop in the tab order; the arrow keys move along the others
    (static/js/charts.js), whose tooltip shows the numbers on hover, tap or focus."""
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
        title = head + "".join(f"\n{label} {text[column]}" for label, text in zip(labels, texts, strict=True))
        tabindex = "0" if column == 0 else "-1"
        link = links[start] if links else None  # a number and the chart's own filter: nothing to escape
        focus = "" if link else f' tabindex="{tabindex}"'  # a link takes the focus itself
        rect = (f'<rect class="run-column" x="{left:.1f}" y="{TOP}" width="{max(right - left, 1):.1f}" '
                f'height="{BOTTOM - TOP}"{focus}><title>{title}</title></rect>')
        out.append(f'<a href="{link}" data-step="{steps[start]}" tabindex="{tabindex}">{rect}</a>' if link
                   else rect)
    return "".join(out)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
