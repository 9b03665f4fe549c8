"""The run pages with the plain Django client: the batch list folds a run into one row, the run
page charts every measure with drill-down links and numbers on hover, its table and CSV hold
the same numbers, compare aligns runs by step, the export is a dataset partitioned by step,
prune keeps rankings and figures, and a blind annotator is told the figures are hidden."""

import csv
import io
import json
import tarfile

import pyarrow.dataset as ds
import pytest
from django.urls import reverse

from tests.webapp.annotationdata import set_policy
from tests.webapp.runs.rundata import make_run
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.services import advantage_config_update
from webapp.models import Batch, Grading, Run, RunStep, Transcript
from webapp.runs.services import figures_refresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_runs(tmp_path):
    gagar = make_run(tmp_path, "gagar <i>1</i>", steps=3)
    baseline = make_run(tmp_path, "grpo-baseline", steps=2, graded=False, seed=1)
    for batch, _ in [*gagar.values(), *baseline.values()]:
        figures_refresh(batch.pk)
    return Run.objects.get(name="gagar <i>1</i>"), Run.objects.get(name="grpo-baseline")


def test_the_batch_list_folds_a_runs_steps_into_one_row(client, researcher, two_runs, sample_batch):
    client.force_login(researcher)
    body = client.get(reverse("index")).content.decode()
    gagar, baseline = two_runs
    assert body.count('class="run-row"') == 2
    assert f'href="{reverse("run", args=[gagar.pk])}">gagar &lt;i&gt;1&lt;/i&gt;</a>' in body
    assert "run · 3 steps, latest" in body and "gagar &lt;i&gt;1&lt;/i&gt;/step-0" not in body
    assert f'href="{reverse("batch", args=[sample_batch.pk])}"' in body  # a batch outside runs, as before


def test_the_run_page_draws_every_measure_with_drill_down_and_hover_numbers(client, researcher, two_runs):
    gagar, _ = two_runs
    client.force_login(researcher)
    body = client.get(reverse("run", args=[gagar.pk])).content.decode()
    for key in ("pass_rate", "groups", "grading", "mass_moved", "factors", "lines", "num_turns", "output_tokens",
                "review", "latency"):
        assert f'id="chart-{key}"' in body, key
    step1 = RunStep.objects.get(run=gagar, number=1)
    batch = reverse("batch", args=[step1.batch_id])
    assert f'<a href="{batch}?label=mixed" data-step="1" tabindex="-1">' in body  # a column
    assert f'<a href="{batch}?label=all_fail" data-step="1" tabindex="-1">' in body  # a dot
    pass_rate = Batch.objects.get(pk=step1.batch_id).pass_rate
    assert f"step 1\npass rate {pass_rate:.4g}" in body
    assert "<h1 id=\"run-name\">gagar &lt;i&gt;1&lt;/i&gt;</h1>" in body and "<i>1</i>" not in body
    assert 'href="' + reverse("run_table", args=[gagar.pk]) + '"' in body


def test_the_table_and_the_csv_hold_the_charts_numbers(client, researcher, two_runs):
    gagar, _ = two_runs
    client.force_login(researcher)
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("run_csv", args=[gagar.pk])).content.decode())))
    assert [row["step"] for row in rows] == ["0", "1", "2"]
    for row in rows:
        batch = Batch.objects.get(name=row["batch"])
        assert float(row["pass_rate"]) == pytest.approx(batch.pass_rate)
        assert int(row["trajectories"]) == batch.n_trajectories
        assert int(row["grading_graded"]) == batch.groups.filter(label="mixed").count()
    table = client.get(reverse("run_table", args=[gagar.pk])).content.decode()
    assert ">mass moved</th>" in table and "gagar &lt;i&gt;1&lt;/i&gt;/step-2" in table


def test_compare_aligns_runs_by_step_with_the_difference_per_measure(client, researcher, two_runs):
    gagar, baseline = two_runs
    client.force_login(researcher)
    body = client.get(reverse("runs_compare") + f"?run={gagar.pk}&run={baseline.pk}").content.decode()
    assert "2 steps in common (0 to 1)" in body
    assert "gagar &lt;i&gt;1&lt;/i&gt; · pass rate" in body and "grpo-baseline · pass rate" in body
    assert "grpo-baseline − gagar &lt;i&gt;1&lt;/i&gt;" in body
    one = client.get(reverse("runs_compare") + f"?run={gagar.pk}")
    assert one.status_code == 400 and "pick at least two runs to compare" in one.content.decode()


def test_compare_measures_the_differences_from_the_baseline_chosen(client, researcher, two_runs):
    # The differences were always from the first run ticked, the order the list gave.
    gagar, baseline = two_runs
    client.force_login(researcher)
    chosen = {"run": [gagar.pk, baseline.pk], "baseline": baseline.pk}
    body = client.get(reverse("runs_compare"), chosen).content.decode()
    assert "gagar &lt;i&gt;1&lt;/i&gt; − grpo-baseline" in body and "grpo-baseline − gagar" not in body
    assert f'<option value="{baseline.pk}" selected>grpo-baseline</option>' in body
    unticked = client.get(reverse("runs_compare"), {"run": [gagar.pk, baseline.pk], "baseline": 987654})
    assert unticked.status_code == 400 and "Select a valid choice" in unticked.content.decode()


def test_the_whole_run_export_is_one_dataset_partitioned_by_step(client, researcher, two_runs, tmp_path):
    gagar, _ = two_runs
    client.force_login(researcher)
    response = client.get(reverse("run_export", args=[gagar.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(b"".join(response.streaming_content))) as tar:
        tar.extractall(tmp_path / "out", filter="data")
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert [s["step"] for s in manifest["steps"]] == [0, 1, 2] and manifest["run"] == "gagar <i>1</i>"
    table = ds.dataset(tmp_path / "out", format="parquet", partitioning="hive").to_table()
    assert table.num_rows == manifest["rows"] == sum(b.n_trajectories for b in Batch.objects.filter(
        run_step__run=gagar))
    assert sorted(set(table.column("step").to_pylist())) == [0, 1, 2]


def test_the_export_waits_for_grading_unless_asked(client, researcher, two_runs):
    gagar, _ = two_runs
    step = RunStep.objects.get(run=gagar, number=2)
    Grading.objects.filter(run__batch=step.batch).update(status="queued")
    client.force_login(researcher)
    response = client.get(reverse("run_export", args=[gagar.pk]), follow=True)
    assert "gagar &lt;i&gt;1&lt;/i&gt;/step-2" in response.content.decode()  # the refusal names the step's batch
    assert client.get(reverse("run_export", args=[gagar.pk]) + "?allow_ungraded=1").status_code == 200


def test_prune_removes_heavy_fields_of_old_steps_and_keeps_rankings_and_figures(client, researcher, two_runs):
    gagar, _ = two_runs
    old = RunStep.objects.get(run=gagar, number=0).batch
    Transcript.objects.bulk_create([Transcript(trajectory=t, messages=[{"role": "user", "content": "hi"}])
                                    for t in old.groups.first().trajectories.all()])
    gradings = Grading.objects.filter(run__batch=old).count()
    client.force_login(researcher)
    response = client.post(reverse("run_prune", args=[gagar.pk]), {"keep_last": 2}, follow=True)
    body = response.content.decode()
    assert "Pruned 1 steps (0 to 0)" in body and 'id="run-pruned"' in body
    assert not Transcript.objects.filter(trajectory__batch_id=old.pk).exists()
    assert Grading.objects.filter(run__batch=old).count() == gradings and old.figures.measures is not None
    assert RunStep.objects.filter(run=gagar, pruned_at__isnull=False).count() == 1


def test_an_annotator_prunes_nothing_and_a_blind_one_is_told_the_figures_are_hidden(client, annotator, two_runs):
    gagar, _ = two_runs
    set_policy(RunStep.objects.get(run=gagar, number=1).batch, blind=True)
    client.force_login(annotator)
    assert client.post(reverse("run_prune", args=[gagar.pk]), {"keep_last": 0}).status_code == 403
    body = client.get(reverse("run", args=[gagar.pk])).content.decode()
    assert "figures are hidden: the rankings of batch" in body and 'id="chart-' not in body
    assert client.get(reverse("run_csv", args=[gagar.pk])).status_code == 403


def test_the_page_is_drawn_again_once_a_steps_figures_change(client, researcher, two_runs,
                                                             django_capture_on_commit_callbacks):
    gagar, baseline = two_runs
    client.force_login(researcher)
    url = reverse("run", args=[gagar.pk])
    compare = reverse("runs_compare") + f"?run={gagar.pk}&run={baseline.pk}"
    assert "advantage config changed" not in client.get(url).content.decode()
    assert "advantage config changed" not in client.get(compare).content.decode()
    step = RunStep.objects.get(run=gagar, number=2).batch
    with django_capture_on_commit_callbacks(execute=True):  # the change requests the step's figures
        advantage_config_update(batch=step,
                                config=parse_advantage_config({"schedule": "exponential", "params": {"gamma": 0.5}}))
    assert 'id="run-updating"' in client.get(url).content.decode()
    figures_refresh(step.pk)  # the worker's task
    body = client.get(url).content.decode()
    assert "step 2: advantage config changed: schedule &#x27;linear&#x27; → &#x27;exponential&#x27;" in body
    assert "advantage config changed" in client.get(compare).content.decode()
