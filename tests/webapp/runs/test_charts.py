"""The run charts at a thousand steps: a spike survives the line's thinning, a column names its
steps' lowest and highest values, a gap breaks the line, and labels are escaped."""

import re

from webapp.runs.charts import MAX_COLUMNS, Series, step_chart


def test_a_long_run_keeps_its_spike_and_its_columns_say_their_range():
    steps = list(range(1000))
    values = [0.5] * 1000
    values[637] = 0.95  # one bad step in a thousand
    values[500:510] = [None] * 10  # steps without figures yet
    svg = str(step_chart(title="Pass <rate>", desc="d", steps=steps, series=[Series("pass & fail", values)],
                         low=0.0, high=1.0))
    lines = re.findall(r'<polyline class="run-line run-series-0" points="([^"]+)"', svg)
    assert len(lines) == 2  # broken at the gap
    ys = {float(point.split(",")[1]) for line in lines for point in line.split()}
    assert min(ys) == round(170 - 140 * 0.95, 1)  # the spike's point is drawn
    titles = re.findall(r'<rect class="run-column"[^>]*><title>([^<]*)</title>', svg)
    assert len(titles) == MAX_COLUMNS
    assert "steps 635–639: pass &amp; fail 0.5 to 0.95" in titles
    assert "steps 500–504: pass &amp; fail —" in titles
    assert "<title>Pass &lt;rate&gt;</title>" in svg and "<rate>" not in svg
