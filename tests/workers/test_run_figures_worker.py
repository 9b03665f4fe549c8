"""A step's figures through a real worker: its import and its grading each lead to fresh stored
figures, its run page's and its grading panel's, off the request path; a figures worker killed
mid-update leaves the previous figures and the "updating" state, and the sweep finishes it."""

import pytest
from django.conf import settings
from django.utils import timezone

from tests.webapp.runs.rundata import import_step, step_records
from tests.workers.conftest import wait_until
from webapp.derived import RUN_FIGURES, sweep_derived
from webapp.grading.services import grading_launch
from webapp.models import BatchFigures, Grading, GradingPanel
from webapp.runs.services import figures_refresh

pytestmark = pytest.mark.django_db(transaction=True)

SLOW_APP = "tests.workers.slow_figures_app"  # started by name only: importing it here would slow this process too
STARTED = "figures-started"  # what it writes when a slow recompute begins


def stored(batch):
    return BatchFigures.objects.filter(batch=batch).first()


def settled(batch) -> bool:
    row = stored(batch)
    return row is not None and row.measures is not None and row.requested_at is None


def panel(batch):
    """The batch's grading panel figures once computed and current; else None."""
    row = GradingPanel.objects.filter(batch=batch).first()
    return row.figures if row is not None and row.figures is not None and row.requested_at is None else None


def test_an_import_and_a_grading_each_lead_to_fresh_figures(tmp_path, redis_broker, workers):
    workers(redis_broker)
    batch = import_step(tmp_path, "live", 0, step_records(0))
    wait_until(lambda: settled(batch), timeout=30, message="the figures after the import")
    mixed = batch.groups.filter(label="mixed").count()
    assert stored(batch).measures["grading"]["not_launched"] == mixed
    first = stored(batch).computed_at

    run = grading_launch(batch=batch, grader="heuristic").run
    wait_until(lambda: not run.gradings.exclude(status=Grading.Status.DONE).exists(), timeout=30, message="grading")
    wait_until(lambda: settled(batch) and stored(batch).measures["grading"]["graded"] == mixed, timeout=30,
               message=f"the figures after the grading: {stored(batch).measures['grading']}")
    row = stored(batch)
    assert row.computed_at > first and row.measures["mass_moved"] > 0
    wait_until(lambda: panel(batch) is not None and panel(batch)["grading"]["graded"] == mixed, timeout=30,
               message=f"the grading panel after the grading: {panel(batch)}")
    assert panel(batch)["histogram"]["n"] > 0


def test_a_worker_killed_mid_update_leaves_the_previous_figures_and_the_sweep_finishes(tmp_path, filesystem_broker,
                                                                                      workers):
    batch = import_step(tmp_path, "slow-run", 0, step_records(0))  # its recompute's message waits in the broker
    figures_refresh(batch.pk)  # the figures before a change
    before = stored(batch).measures
    BatchFigures.objects.filter(batch=batch).update(requested_at=timezone.now())  # the change: requested again
    (settings.DATA_DIR / STARTED).unlink(missing_ok=True)
    doomed = workers(filesystem_broker, app=SLOW_APP, log="slow.log")
    wait_until((settings.DATA_DIR / STARTED).exists, timeout=30, message=f"the slow recompute:\n{doomed.output()}")
    doomed.kill()
    row = stored(batch)
    assert row.measures == before and row.requested_at is not None  # shown as the previous ones, updating

    long_ago = timezone.now() - timezone.timedelta(minutes=5)
    BatchFigures.objects.filter(batch=batch).update(requested_at=long_ago, sent_at=long_ago)
    for path in (tmp_path / "broker" / "queue").iterdir():  # whatever the killed worker left
        path.unlink()
    workers(filesystem_broker)
    assert sweep_derived(RUN_FIGURES) == 1
    wait_until(lambda: settled(batch), timeout=30, message="the recompute the sweep sent")
    assert stored(batch).computed_at > long_ago
