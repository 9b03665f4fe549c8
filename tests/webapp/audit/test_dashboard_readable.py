"""What keeps the audit pages honest to read: the dashboard's note polls until the worker's
figures are ready and then has the page reload; a value over few groups shows its n and is
drawn apart; strata show their values rounded to the data, not raw floats."""

import pytest
from django.urls import reverse

from tests.webapp.annotationdata import GRADER_TIERS, grade, review_batch, save
from tests.webapp.audit.auditdata import make_set
from tests.webapp.audit.test_dashboard import HUMAN, graded, html_tables
from webapp.audit.charts import FEW, Bar, bar_chart, line_chart
from webapp.audit.sampling import value_ranges
from webapp.audit.services import figures_refresh
from webapp.models import Group

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_ranked(tmp_path, annotator):
    """Three groups graded by v1; a person ranked one of them."""
    batch = review_batch(tmp_path, n=3, name="few")
    groups = list(Group.objects.filter(batch=batch).order_by("pk"))
    for group in groups:
        graded(group, GRADER_TIERS, "v1")
    save(groups[0], annotator, HUMAN[1])
    return batch


def test_the_note_polls_until_the_figures_are_ready_then_reloads_the_page(one_ranked, client, auditor):
    client.force_login(auditor)
    params = {"batch": one_ranked.pk}
    html = client.get(reverse("audit_dashboard"), params).content.decode()
    poll = f'hx-get="{reverse("audit_dashboard_progress")}?batch={one_ranked.pk}" hx-trigger="every 2s"'
    assert poll in html
    response = client.get(reverse("audit_dashboard_progress"), params)  # still computing: the note again
    assert response.status_code == 200 and "HX-Refresh" not in response
    assert "Computing…</strong> v1" in response.content.decode() and poll in response.content.decode()
    figures_refresh()
    response = client.get(reverse("audit_dashboard_progress"), params)
    assert response.status_code == 200 and response["HX-Refresh"] == "true" and response.content == b""
    assert "hx-trigger" not in client.get(reverse("audit_dashboard"), params).content.decode()  # nothing to wait for
    bad = client.get(reverse("audit_dashboard_progress"), {"version": "v9"})
    assert bad.status_code == 400 and bad.content.decode() == "version: 'v9' graded nothing in this selection"


def test_a_value_over_one_group_shows_its_n_and_is_drawn_apart(one_ranked, client, auditor):
    client.force_login(auditor)
    client.get(reverse("audit_dashboard"), {"batch": one_ranked.pk})
    figures_refresh()
    html = client.get(reverse("audit_dashboard"), {"batch": one_ranked.pk}).content.decode()
    assert html_tables(html)["table-agreement"][1][-1] == "1"  # one group behind the agreement
    section = html[html.index('id="section-agreement"'):html.index('id="table-agreement"')]
    assert 'class="chart-bar chart-few"' in section and 'class="chart-n chart-few"' in section and ">n=1<" in section
    assert f"dashed: n &lt; {FEW}" in section


def test_bars_and_points_mark_only_the_values_over_few_groups():
    chart = bar_chart(title="t", desc="d", bars=[Bar("one", 1.0, (1.0, 1.0), 1), Bar("many", 0.5, (0.4, 0.6), FEW),
                                                 Bar("uncounted", 0.5)])
    assert chart.count("chart-bar chart-few") == 1 and chart.count('class="chart-bar"') == 2
    assert ">n=1<" in chart and f">n={FEW}<" in chart and chart.count(">n=") == 2
    assert "<title>one\n1.000 [1.000, 1.000], n = 1</title>" in chart  # the bar's tooltip
    many = bar_chart(title="t", desc="d", bars=[Bar("many", 0.5, (0.4, 0.6), 40)])
    assert "chart-few" not in many and "dashed" not in many
    line = line_chart(title="t", desc="d", points=[Bar("v1", 0.2, None, 3), Bar("v2", 0.4, None, 30)])
    assert line.count("chart-point chart-few") == 1 and "dashed: n &lt;" in line


def test_value_ranges_round_to_the_data():
    # the case: means of line counts print to three significant figures, the same decimals throughout
    assert value_ranges([(1.0, 5.0), (5.333333333, 6.5), (7.25, 40.0), (None, None)]) == [
        "1.0 to 5.0", "5.3 to 6.5", "7.2 to 40.0", None]
    assert value_ranges([(2.0, 4.0), (7.0, 7.0), (8.0, 120.0)]) == ["2 to 4", "7", "8 to 120"]  # whole numbers
    assert value_ranges([(0.0, 1 / 3), (0.5, 1.0)]) == ["0.00 to 0.33", "0.50 to 1.00"]  # shares
    # more decimals where three figures would print two different values alike
    assert value_ranges([(0.1, 0.12341), (0.12344, 0.5)]) == ["0.10000 to 0.12341", "0.12344 to 0.50000"]
    assert value_ranges([(None, None)]) == [None] and value_ranges([]) == []


def test_strata_pages_show_rounded_values(tmp_path, client, researcher):
    batch = review_batch(tmp_path, n=4, name="strata")
    for group, confidence in zip(Group.objects.filter(batch=batch).order_by("pk"), [1 / 3, 2 / 3, 0.5, 1.0],
                                 strict=True):
        grade(group, confidence=confidence)
    client.force_login(researcher)
    preview = client.post(reverse("audit_sets"), {
        "name": "s", "source": f"batch:{batch.pk}", "stratify_by": "confidence", "bins": 2, "seed": 0, "size": 2,
        "confidence": "0.95", "action": "preview"})
    audit_set = make_set(researcher, batch, size=2, stratify_by="confidence", bins=2)
    assert [q["stratum"] for q in audit_set.design["quotas"]] == ["0.333333 to 0.5", "0.666667 to 1"]  # as drawn
    for response in (preview, client.get(reverse("audit_set", args=[audit_set.pk])),
                     client.get(reverse("audit_report", args=[audit_set.pk]))):
        html = response.content.decode()
        assert response.status_code == 200 and "<td>0.33 to 0.50</td>" in html and "<td>0.67 to 1.00</td>" in html
        assert "0.333333" not in html
