"""Batches named `<run>/step-<n>` before runs existed become the steps of their run; a batch's
grading panel figures, once stored with its run page's, move to their own row."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from webapp.models import Batch, BatchFigures, GradingPanel, Run, RunStep

BEFORE = [("webapp", "0018_group_patch_sizes")]


@pytest.mark.django_db(transaction=True)
def test_step_batches_are_attached_to_their_runs_and_every_batch_has_its_figures_requested():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps.get_model("webapp", "Batch")
    for name in ("trl-example/step-1", "trl-example/step-0", "team/exp 3/step-12", "plain", "x/step-01",
                 "x/step-", "y/step-2/extra", "<b>run</b>/step-4"):
        old.objects.create(name=name, n_groups=0)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert {run.name: sorted(run.steps.values_list("number", "batch__name")) for run in Run.objects.all()} == {
        "trl-example": [(0, "trl-example/step-0"), (1, "trl-example/step-1")],
        "team/exp 3": [(12, "team/exp 3/step-12")],
        "<b>run</b>": [(4, "<b>run</b>/step-4")],
    }
    # Not a step's name: a leading zero, no number, something after it.
    assert set(Batch.objects.filter(run_step__isnull=True).values_list("name", flat=True)) == {
        "plain", "x/step-01", "x/step-", "y/step-2/extra"}
    assert RunStep.objects.get(batch__name="trl-example/step-0").created_at == Batch.objects.get(
        name="trl-example/step-0").created_at
    assert BatchFigures.objects.filter(requested_at__isnull=False).count() == Batch.objects.count()


@pytest.mark.django_db(transaction=True)
def test_each_batchs_grading_panel_moves_to_its_own_row_as_it_stood():
    before = [("webapp", "0024_export_format_from_registry")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    computed, requested = "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"
    for name, panel, asked, error in (("shown", {"histogram": {"n": 3}}, None, ""),
                                      ("failed", {"histogram": {"n": 1}}, requested, "RuntimeError: a bad day"),
                                      ("never", None, requested, "")):
        batch = old.get_model("webapp", "Batch").objects.create(name=name, n_groups=0)
        old.get_model("webapp", "BatchFigures").objects.create(
            batch=batch, measures={"groups": 0}, panel=panel, computed_at=computed if panel else None,
            requested_at=asked, error=error)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    panels = {row.batch.name: row for row in GradingPanel.objects.select_related("batch")}
    assert {name: row.figures for name, row in panels.items()} == {
        "shown": {"histogram": {"n": 3}}, "failed": {"histogram": {"n": 1}}, "never": None}
    assert panels["shown"].requested_at is None and panels["shown"].computed_at is not None
    assert panels["failed"].requested_at is not None and panels["failed"].error == "RuntimeError: a bad day"
    assert BatchFigures.objects.get(batch__name="shown").measures == {"groups": 0}
