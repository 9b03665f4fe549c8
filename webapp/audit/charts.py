"""Server-rendered SVG charts for the audit dashboard: bars with error bars, a line over
versions with its interval band, a histogram. Readable without JavaScript; each has a
<title> and a <desc> for screen readers, and every label is escaped (grader versions are
user-supplied). The table beneath each chart holds its numbers; a chart only draws them.
A bar or point says how many groups (or verdicts) it rests on, and one that rests on fewer than
FEW is drawn hollow and dashed: a mean of one group is a full bar otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from webapp.audit.figures import DRIFT_MEASURES, MEASURES, Dashboard
from webapp.audit.ranking import COVARIATES
from webapp.charts import distinct_labels, nice_ticks, tick_text

WIDTH = 640  # drawn at most this wide (static/css/audit-dashboard.css): its text at its own size
PLOT_TOP, PLOT_BOTTOM = 34, 174  # y of the plot area's top and bottom
LEFT, RIGHT = 48, WIDTH - 12
CHAR = 7.0  # the width of a character of the 12.5 px labels, near enough to lay them out
LABEL = 22  # characters of a label under the plot; the whole one is in its <title> and the table
FEW = 10  # a value over fewer groups than this is drawn apart: its interval says little


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: nothing to draw (the table says "undefined")
    interval: tuple[float, float] | None = None
    n: int | None = None  # the groups (or verdicts) behind it; None: not counted

    @property
    def few(self) -> bool:
        return self.n is not None and self.n < FEW


def _y(value: float, low: float, high: float) -> float:
    return round(PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) * (value - low) / (high - low), 2)


def _frame(title: str, desc: str, body: str, ticks: list[float], *, css: str, few: bool = False,
           height: float = PLOT_BOTTOM + 40) -> SafeString:
    low, high = ticks[0], ticks[-1]
    step = ticks[1] - ticks[0]
    axis = format_html_join("", '<line class="{}" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                                '<text class="chart-tick" x="{}" y="{}" text-anchor="end">{}</text>',
                            (("chart-zero" if t == 0 and low < 0 else "chart-grid", LEFT, RIGHT, _y(t, low, high),
                              _y(t, low, high), LEFT - 5, _y(t, low, high) + 4, tick_text(t, step)) for t in ticks))
    note = ""
    if few:
        note = format_html('<text class="chart-note" x="{}" y="18" text-anchor="end">dashed: n &lt; {}</text>', RIGHT,
                           FEW)
        desc += f"; dashed where a value rests on fewer than {FEW} (its n: groups, verdicts or gradings)"
    return format_html(
        '<svg class="chart {}" viewBox="0 0 {} {}" role="group" aria-label="{}" xmlns="http://www.w3.org/2000/svg">'
        '<title>{}</title><desc>{}</desc><text class="chart-title" x="{}" y="18">{}</text>{}{}{}</svg>',
        css, WIDTH, round(height), title, title, desc, LEFT, title, note, axis,
        mark_safe(body))  # noqa: S308 - built with format_html


def _labels(xs: list[float], texts: list[str], step: float) -> tuple[str, float]:
    """The labels under the plot, shortened where they agree (webapp.charts.distinct_labels)
    with the whole text in a <title>: level where they fit between their neighbours, else
    upright. Returns them and the chart's height."""
    shown = distinct_labels(texts, LABEL)
    widest = max((len(text) for text in shown), default=0) * CHAR
    level = widest + 8 <= step  # else upright, reading upwards: slanted ones overran the chart's sides
    out = []
    for x, text, whole in zip(xs, shown, texts, strict=True):
        if level:
            out.append(format_html('<text class="chart-label" x="{}" y="{}" text-anchor="middle">{}<title>{}</title>'
                                   "</text>", round(x, 2), PLOT_BOTTOM + 18, text, whole))
        else:
            x, y = round(x + 4, 2), PLOT_BOTTOM + 8
            out.append(format_html('<text class="chart-label" x="{}" y="{}" text-anchor="end" transform="rotate(-90 '
                                   '{} {})">{}<title>{}</title></text>', x, y, x, y, text, whole))
    return "".join(out), PLOT_BOTTOM + 30 + (0 if level else widest)


def bar_chart(*, title: str, desc: str, bars: list[Bar], low: float = 0.0, high: float = 1.0) -> SafeString:
    """One bar per entry from the baseline (0, or `low` when 0 is outside), with a whisker
    over its interval and its n above it."""
    ticks = nice_ticks(low, high)
    low, high = ticks[0], ticks[-1]
    step = (RIGHT - LEFT) / max(len(bars), 1)
    base = _y(min(max(0.0, low), high), low, high)
    parts = []
    for i, bar in enumerate(bars):
        x = LEFT + i * step
        centre = x + step / 2
        if bar.value is not None:
            top = _y(bar.value, low, high)
            parts.append(format_html('<rect class="chart-bar{}" x="{}" y="{}" width="{}" height="{}" tabindex="0">'
                                     "<title>{}\n{}</title></rect>", " chart-few" if bar.few else "",
                                     round(x + step * 0.2, 2), min(top, base), round(step * 0.6, 2),
                                     round(abs(base - top), 2), bar.label, _value(bar)))
            if bar.n is not None:
                above = min(top, base, _y(bar.interval[1], low, high) if bar.interval else base)
                parts.append(format_html('<text class="chart-n{}" x="{}" y="{}" text-anchor="middle">n={}</text>',
                                         " chart-few" if bar.few else "", round(centre, 2), round(above - 4, 2),
                                         bar.n))
        if bar.interval is not None:
            y1, y2 = _y(bar.interval[0], low, high), _y(bar.interval[1], low, high)
            parts.append(format_html('<path class="chart-whisker" d="M{} {}V{}M{} {}h{}M{} {}h{}"/>',
                                     round(centre, 2), y1, y2, round(centre - 5, 2), y1, 10, round(centre - 5, 2),
                                     y2, 10))
    labels, height = _labels([LEFT + step * (i + 0.5) for i in range(len(bars))], [bar.label for bar in bars], step)
    return _frame(title, desc, "".join(parts) + labels, ticks, css="chart-bars",
                  few=any(bar.few and bar.value is not None for bar in bars), height=height)


def line_chart(*, title: str, desc: str, points: list[Bar], low: float = -1.0, high: float = 1.0) -> SafeString:
    """Points in order (versions over time) joined by a line, over the band of their intervals."""
    ticks = nice_ticks(low, high)
    low, high = ticks[0], ticks[-1]
    step = (RIGHT - LEFT) / max(len(points), 1)
    xs = [LEFT + step * (i + 0.5) for i in range(len(points))]
    shown = [(x, p) for x, p in zip(xs, points, strict=True) if p.value is not None]
    banded = [(x, p) for x, p in shown if p.interval is not None]
    parts = []
    if banded:
        upper = [f"{round(x, 2)},{_y(p.interval[1], low, high)}" for x, p in banded]
        lower = [f"{round(x, 2)},{_y(p.interval[0], low, high)}" for x, p in reversed(banded)]
        parts.append(format_html('<polygon class="chart-band" points="{}"/>', " ".join(upper + lower)))
    if shown:
        parts.append(format_html('<polyline class="chart-line" points="{}"/>',
                                 " ".join(f"{round(x, 2)},{_y(p.value, low, high)}" for x, p in shown)))
    parts += [format_html('<circle class="chart-point{}" cx="{}" cy="{}" r="5" tabindex="0"><title>{}\n{}</title>'
                          "</circle>",
                          " chart-few" if p.few else "", round(x, 2), _y(p.value, low, high), p.label, _value(p))
              for x, p in shown]
    labels, height = _labels(xs, [p.label for p in points], step)
    return _frame(title, desc, "".join(parts) + labels, ticks, css="chart-line-over",
                  few=any(p.few for _, p in shown), height=height)


def histogram_chart(*, title: str, desc: str, edges: list[float], counts: list[int]) -> SafeString:
    """Counts per bin, bins laid side by side from the first edge to the last; the x axis
    labelled at round values between them."""
    ticks = nice_ticks(0, max(counts, default=0) or 1)
    top = ticks[-1]
    step = (RIGHT - LEFT) / max(len(counts), 1)
    parts = [format_html('<rect class="chart-bar" x="{}" y="{}" width="{}" height="{}" tabindex="0">'
                         "<title>{} to {}\n{}</title></rect>", round(LEFT + i * step + 0.5, 2), _y(count, 0, top),
                         round(max(step - 1, 0.5), 2), round(PLOT_BOTTOM - _y(count, 0, top), 2), f"{edges[i]:.3g}",
                         f"{edges[i + 1]:.3g}", count)
             for i, count in enumerate(counts)]
    if len(edges) > 1 and edges[-1] > edges[0]:
        marks = nice_ticks(edges[0], edges[-1], count=6)
        width = edges[-1] - edges[0]
        parts += [format_html('<text class="chart-label" x="{}" y="{}" text-anchor="middle">{}</text>',
                              round(LEFT + (RIGHT - LEFT) * (mark - edges[0]) / width, 2), PLOT_BOTTOM + 18,
                              tick_text(mark, marks[1] - marks[0]))
                  for mark in marks if edges[0] - 1e-9 <= mark <= edges[-1] + 1e-9]
    return _frame(title, desc, "".join(parts), ticks, css="chart-histogram")


def _correctness_charts(versions) -> list[SafeString]:
    """For each reference some version has groups for, a chart of pairwise accuracy and one of
    the top-1 rate: each version's bar with its baselines' (on the same groups) beside it."""
    charts: dict[tuple[str, str], list[Bar]] = {}  # by (reference, measure)
    for v in versions:
        for reference, top1, results in v.correctness.references():
            for key, measure in (("pairwise", "pairwise accuracy"), ("top1", top1)):
                bars = charts.setdefault((reference, measure), [])
                for r in results:
                    e = getattr(r, key)  # random's seeds are in the table: "random" is label enough
                    bars.append(Bar(f"{v.version.version} · {r.name.partition(' (')[0]}", e.value, e.interval, e.n))
    return [bar_chart(title=f"{measure.capitalize()} · {reference}", desc=f"{measure} against {reference}, per "
                      "grader version beside shortest patch first and random on the same groups: mean over groups "
                      "with a 95% bootstrap interval", bars=bars) for (reference, measure), bars in charts.items()]


def _value(bar: Bar) -> str:
    text = f"{bar.value:.3f}"
    text += f" [{bar.interval[0]:.3f}, {bar.interval[1]:.3f}]" if bar.interval else ""
    return text + (f", n = {bar.n}" if bar.n is not None else "")


# --- the dashboard's charts ------------------------------------------------------------------


def dashboard_charts(d: Dashboard) -> dict[str, list[SafeString]]:
    """The charts above each of the dashboard's tables (`webapp.audit.tables`), by table name."""
    versions = d.versions

    def bars(estimates):
        return [Bar(label, e.value, e.interval, e.n) for label, e in estimates]

    concordance = d.concordance.batches if d.concordance else []

    charts: dict[str, list[SafeString]] = {
        "correctness": _correctness_charts(versions),
        "agreement": [bar_chart(title=f"{label} with human rankings", desc=f"{label} per grader version, mean over "
                                "groups with a 95% bootstrap interval", low=-1.0 if key in ("kendall_tau", "spearman")
                                else 0.0, bars=bars((v.version.version, getattr(v.ranking.agreement, key))
                                                    for v in versions))
                      for key, label in MEASURES[:3]],
        "concordance": [bar_chart(title="Agreement among annotators", desc="per batch: Kendall's W and the mean "
                                  "pairwise tau-b, means over groups with a 95% bootstrap interval, and "
                                  "Krippendorff's alpha (ordinal) over their trajectories", low=-1.0,
                                  bars=[bar for c in concordance for bar in (
                                      Bar(f"{c.batch} · W", c.kendalls_w.value, c.kendalls_w.interval,
                                          c.kendalls_w.n),
                                      Bar(f"{c.batch} · tau", c.pairwise_tau.value, c.pairwise_tau.interval,
                                          c.pairwise_tau.n),
                                      Bar(f"{c.batch} · alpha", c.alpha, None, c.groups))])]
                        if concordance else [],
        "proxy": [bar_chart(title="Kendall tau-b with the proxy ranking", desc="proxy: similarity to the reference "
                            "fix, per grader version, with a 95% bootstrap interval", low=-1.0,
                            bars=bars((v.version.version, v.ranking.proxy.kendall_tau) for v in versions))],
        "verdicts": [bar_chart(title="Auditors' verdicts", desc="share of each verdict per grader version, with a "
                               "95% Wilson interval", bars=[Bar(f"{v.version.version} · {r.label}", r.value, r.interval,
                                                                r.n) for v in versions for r in v.verdicts.verdicts])],
        "categories": [bar_chart(title="Error categories", desc="share of verdicts naming each category, with a 95% "
                                 "Wilson interval", bars=[Bar(f"{v.version.version} · {r.label}", r.value, r.interval,
                                                               r.n) for v in versions for r in v.verdicts.categories])],
        "failures": [bar_chart(title="Grading failure rate", desc="failed / finished gradings per version, with a "
                               "95% Wilson interval", bars=[Bar(v.version.version, v.ranking.failure.value,
                                                               v.ranking.failure.interval, v.ranking.failure.n)
                                                           for v in versions])],
        "bias": [bar_chart(title=f"Position bias: {label}", desc=f"Spearman rho of rank with {label}, mean over "
                           "groups with a 95% bootstrap interval; positive: larger values rank lower", low=-1.0,
                           bars=bars((v.version.version, v.ranking.bias[key]) for v in versions))
                 for key, label in COVARIATES],
        "factors": [histogram_chart(title=f"Factors · {v.version.version}", desc="distribution of the schedule's "
                                    "factors of the ranked trajectories", edges=v.ranking.factors.edges,
                                    counts=v.ranking.factors.counts) for v in versions],
        "shifts": [histogram_chart(title=f"Advantage shifts · {v.version.version}", desc="redistributed minus GRPO "
                                   "advantage of the passing trajectories of mixed groups",
                                   edges=v.ranking.shifts.edges, counts=v.ranking.shifts.counts) for v in versions],
        "cost": [],
        "drift": [],
    }
    if versions:
        charts["agreement"].append(line_chart(
            title="Kendall tau-b with human rankings over versions", desc="per grader version in the order of their "
            "first run, with the 95% bootstrap interval as a band",
            points=bars((v.version.version, v.ranking.agreement.kendall_tau) for v in versions)))
    if d.drift and d.drift.points:
        charts["drift"] = [line_chart(title=f"Gold set: {label} over versions", desc=f"{label} with the gold set's "
                                      "verified rankings per grader version, in the order of their first run, with "
                                      "the 95% bootstrap interval as a band", low=-1.0 if key == "kendall_tau" else 0.0,
                                      points=bars((p.version.version, getattr(p.agreement, key))
                                                  for p in d.drift.points))
                           for key, label in DRIFT_MEASURES]
    return charts
