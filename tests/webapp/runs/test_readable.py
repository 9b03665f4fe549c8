"""The run pages read at a glance: an ungraded step is a gap in the mass GAGAR moved, not 0;
compared runs get a colour each and a measure's lines a dash each, and the legend says so; the
table of every number has human headers grouped by chart and a cue when it scrolls sideways."""

import re

import pytest
from django.urls import reverse

from tests.webapp.runs.rundata import grade, import_step, step_records
from webapp.models import Run
from webapp.runs.services import figures_refresh

pytestmark = pytest.mark.django_db


def chart(body: str, key: str) -> str:
    return body.split(f'id="chart-{key}"', 1)[1].split("</figure>", 1)[0]


@pytest.fixture
def gapped(tmp_path):
    """Steps 0 and 2 graded, step 1 not."""
    for step in range(3):
        batch = import_step(tmp_path, "gapped", step, step_records(step))
        if step != 1:
            grade(batch)
        figures_refresh(batch.pk)
    return Run.objects.get(name="gapped")


@pytest.fixture
def two(tmp_path):
    for name, seed in (("gagar-run", 0), ("grpo-run", 1)):
        for step in range(3):
            batch = import_step(tmp_path, name, step, step_records(step, seed=seed))
            grade(batch)
            figures_refresh(batch.pk)
    return Run.objects.get(name="gagar-run"), Run.objects.get(name="grpo-run")


def test_an_ungraded_step_is_a_gap_in_the_mass_moved_not_zero(client, researcher, gapped):
    client.force_login(researcher)
    svg = chart(client.get(reverse("run", args=[gapped.pk])).content.decode(), "mass_moved")
    assert "<polyline" not in svg  # steps 0 and 2 are not joined across step 1
    assert len(re.findall(r'<circle class="run-dot', svg)) == 2
    assert "<title>step 1\nmass moved —</title>" in svg


def test_compare_gives_each_run_a_colour_and_each_line_a_dash(client, researcher, two):
    gagar, grpo = two
    client.force_login(researcher)
    body = client.get(reverse("runs_compare") + f"?run={gagar.pk}&run={grpo.pk}").content.decode()
    svg = chart(body, "groups")  # mixed, all pass, all fail
    lines = re.findall(r'<polyline class="run-line run-series-(\d) run-dash-(\d)"', svg)
    assert sorted(set(lines)) == [("0", "0"), ("0", "1"), ("0", "2"), ("1", "0"), ("1", "1"), ("1", "2")]
    assert "Colour: the run. Dash: the line." in svg
    swatches = re.findall(r'<line class="run-swatch (run-series-\d|run-neutral) run-dash-(\d)"[^>]*/>'
                          r'<text class="run-legend"[^>]*>([^<]*)</text>', svg)
    assert swatches == [("run-series-0", "0", "gagar-run"), ("run-series-1", "0", "grpo-run"),
                        ("run-neutral", "0", "mixed"), ("run-neutral", "1", "all pass"),
                        ("run-neutral", "2", "all fail")]


def test_the_table_has_human_headers_grouped_by_chart_and_a_scroll_cue(client, researcher, gapped):
    client.force_login(researcher)
    body = client.get(reverse("run_table", args=[gapped.pk])).content.decode()
    assert re.search(r'<th scope="colgroup" colspan="1" class="run-table-group-head">Pass rate</th>', body)
    assert re.search(r'<th scope="colgroup" colspan="7" class="run-table-group-head">Changed lines</th>', body)
    heads = re.findall(r'<th scope="col" class="num" title="figures.csv: ([a-z_0-9]+)">([^<]*)</th>', body)
    assert ("pass_rate", "pass rate") in heads and ("lines_best_median", "best third, median") in heads
    assert not [label for _, label in heads if "_" in label]  # no snake_case left
    assert 'class="card run-table-frame scroll-cue"' in body and "scroll sideways" in body
