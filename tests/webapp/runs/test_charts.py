"""The run charts: at a thousand steps a spike survives the line's thinning, a column names its
steps' lowest and highest values, a gap breaks the line, and labels are escaped; the y axis
ticks at round values, the x axis labels every step where the labels fit, and a chart is one
stop in the tab order."""

import re

from webapp.charts import nice_ticks
from webapp.runs.charts import CHAR, LEFT, MAX_COLUMNS, RIGHT, Series, step_chart


def ticks(svg: str, axis: str) -> list[tuple[float, str]]:
    """(position, text) of the axis's tick labels: y for the y axis, x for the x axis."""
    at = "y" if axis == "y" else "x"
    return [(float(pos), text) for pos, text in
            re.findall(rf'<text class="run-tick run-tick-{axis}"[^>]* {at}="([\d.]+)"[^>]*>([^<]*)</text>', svg)]


def test_a_long_run_keeps_its_spike_and_its_columns_say_their_range():
    steps = list(range(1000))
    values = [0.5] * 1000
    values[637] = 0.95  # one bad step in a thousand
    values[500:510] = [None] * 10  # steps without figures yet
    svg = str(step_chart(title="Pass <rate>", desc="d", steps=steps, series=[Series("pass & fail", values)],
                         low=0.0, high=1.0))
    lines = re.findall(r'<polyline class="run-line run-series-0 run-dash-0" points="([^"]+)"', svg)
    assert len(lines) == 2  # broken at the gap
    ys = {float(point.split(",")[1]) for line in lines for point in line.split()}
    assert min(ys) == round(190 - 156 * 0.95, 1)  # the spike's point is drawn
    titles = re.findall(r'<rect class="run-column"[^>]*><title>([^<]*)</title>', svg)
    assert len(titles) == MAX_COLUMNS
    assert "steps 635–639\npass &amp; fail 0.5 to 0.95" in titles
    assert "steps 500–504\npass &amp; fail —" in titles
    assert "<title>Pass &lt;rate&gt;</title>" in svg and "<rate>" not in svg


def test_the_y_axis_ticks_at_round_values_not_at_the_datas():
    svg = str(step_chart(title="t", desc="d", steps=[0, 1, 2], series=[Series("mass", [0.4397, 0.2199, 0.3])],
                         low=0.0))
    assert [text for _, text in ticks(svg, "y")] == ["0", "0.1", "0.2", "0.3", "0.4", "0.5"]
    assert "0.4397" not in [text for _, text in ticks(svg, "y")] and "0.2199" not in svg.split("<rect")[0]
    assert nice_ticks(0, 3700) == [0, 1000, 2000, 3000, 4000] and nice_ticks(-1, 1) == [-1, -0.5, 0, 0.5, 1]


def test_the_x_axis_labels_every_step_of_a_short_run():
    svg = str(step_chart(title="t", desc="d", steps=[1, 2, 3, 4], series=[Series("a", [0.1, 0.2, 0.3, 0.4])]))
    assert [text for _, text in ticks(svg, "x")] == ["1", "2", "3", "4"]


def test_a_long_runs_x_labels_are_evenly_thinned_and_never_overlap():
    for last in (12, 40, 99, 1000):
        steps = list(range(last + 1))
        svg = str(step_chart(title="t", desc="d", steps=steps, series=[Series("a", [0.5] * len(steps))]))
        labels = ticks(svg, "x")
        numbers = [int(text) for _, text in labels]
        gaps = {b - a for a, b in zip(numbers, numbers[1:], strict=False)}
        assert len(gaps) == 1 and numbers[0] == 0, (last, numbers)  # evenly spaced, from the first step
        room = min(b[0] - a[0] for a, b in zip(labels, labels[1:], strict=False))
        assert room >= len(str(last)) * CHAR, (last, room)
        assert len(labels) >= (RIGHT - LEFT) / (len(str(last)) * CHAR + 10) / 5, (last, len(labels))  # not too few


def test_a_chart_is_one_tab_stop_and_its_numbers_read_a_line_each():
    svg = str(step_chart(title="t", desc="d", steps=[0, 1, 2], series=[Series("a", [1, 2, 3]), Series("b", [3, 2, 1])]))
    assert re.findall(r'<rect class="run-column"[^>]* tabindex="(-?\d)"', svg) == ["0", "-1", "-1"]
    assert "<title>step 1\na 2\nb 2</title>" in svg
