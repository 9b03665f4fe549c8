"""The dashboard's charts read at a glance: bar labels keep the part where they differ (the
whole label in a <title>), axes tick at round values, and every bar and point takes the
keyboard's focus for its tooltip (static/js/charts.js)."""

import re

from webapp.audit.charts import Bar, bar_chart, histogram_chart, line_chart
from webapp.charts import distinct_labels


def labels(svg: str) -> list[tuple[str, str]]:
    """(shown, whole) of each label under the plot."""
    return re.findall(r'<text class="chart-label"[^>]*>([^<]*)<title>([^<]*)</title></text>', str(svg))


def ticks(svg: str) -> list[str]:
    return re.findall(r'<text class="chart-tick"[^>]*>([^<]*)</text>', str(svg))


def test_bar_labels_keep_the_part_where_versions_differ():
    names = ["heuristic-1-678aaa9a · correct first", "heuristic-1-678aaa9a · correct last",
             "heuristic-1-678aaa9a · random", "heuristic-2-9f0c11d2 · correct first"]
    chart = bar_chart(title="t", desc="d", bars=[Bar(name, 0.5, (0.4, 0.6), 20) for name in names])
    shown = labels(chart)
    assert [whole for _, whole in shown] == names  # the whole name on hover
    assert len({text for text, _ in shown}) == len(names)  # no two alike
    assert all(len(text) <= 22 for text, _ in shown)
    assert shown[0][0].endswith("correct first") and shown[1][0].endswith("correct last")
    assert "1-678a" in shown[0][0] and "2-9f0c" in shown[3][0]


def test_a_prefix_all_labels_share_is_dropped_from_a_word_on_as_far_as_needed():
    assert distinct_labels(["grader-v1.2.3-long · kendall tau", "grader-v1.2.3-long · spearman"], 16) == [
        "…kendall tau", "…long · spearman"]
    assert distinct_labels(["short", "also short"], 16) == ["short", "also short"]


def test_the_axes_tick_at_round_values():
    assert ticks(bar_chart(title="t", desc="d", low=-1.0, bars=[Bar("v", 0.4397)])) == ["-1", "-0.5", "0", "0.5", "1"]
    assert ticks(line_chart(title="t", desc="d", low=0.0, high=1.0, points=[Bar("v", 0.2199)])) == [
        "0", "0.2", "0.4", "0.6", "0.8", "1"]
    histogram = histogram_chart(title="t", desc="d", edges=[-0.437, -0.1, 0.2, 0.513], counts=[3, 7, 2])
    assert ticks(histogram) == ["0", "2", "4", "6", "8"]
    marks = re.findall(r'<text class="chart-label"[^>]*>([^<]*)</text>', str(histogram))
    assert marks == ["-0.4", "-0.2", "0", "0.2", "0.4"]


def test_bars_and_points_take_the_keyboards_focus():
    bars = bar_chart(title="t", desc="d", bars=[Bar("a", 0.5), Bar("b", 0.7)])
    assert bars.count('tabindex="0"') == 2
    assert line_chart(title="t", desc="d", points=[Bar("a", 0.5), Bar("b", None)]).count('tabindex="0"') == 1
