"""Batches named `<run>/step-<n>` before runs existed become the steps of their run."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from webapp.models import Batch, BatchFigures, Run, RunStep

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
