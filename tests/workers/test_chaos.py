"""The chaos test: a worker killed and the broker stopped mid-run, with the default settings."""

import time

import pytest
from django.db.models import Count, Sum

from tests.workers.conftest import SCRIPTED, make_batch, wait_until
from webapp.grading.services import grading_launch
from webapp.models import Grading

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RUNNING, DONE = Grading.Status.RUNNING, Grading.Status.DONE
GROUPS = 300


def test_a_killed_worker_and_a_stopped_broker_mid_run_end_with_every_mixed_group_graded_once(
        tmp_path, redis_server, own_broker, workers):
    batch = make_batch(tmp_path, "c", GROUPS)
    workers(own_broker, beat=True, log="beat.log")  # the sweep, every GAGAR_SWEEP_INTERVAL
    doomed = workers(own_broker, concurrency=2)
    run = grading_launch(batch=batch, grader=SCRIPTED, config={"delay": 0.05}).run
    # Kill while it holds two tasks' claims (GAGAR_GRADING_CHUNK = 50 groups each).
    wait_until(lambda: run.gradings.filter(status=RUNNING).count() >= 100, timeout=30, every=0.05)

    doomed.kill()
    start = time.monotonic()
    held = run.gradings.filter(status=RUNNING).count()
    redis_server.stop()  # with every message still queued: the other four tasks
    time.sleep(5)
    redis_server.start()  # empty: no persistence
    workers(own_broker, log="survivor.log")
    wait_until(lambda: run.gradings.filter(status=DONE).count() == GROUPS, timeout=120, every=0.5,
               message=str(dict(run.gradings.values_list("status").annotate(n=Count("id")))))
    recovered = time.monotonic() - start

    mixed = batch.groups.filter(label="mixed").count()
    assert mixed == GROUPS == run.gradings.count()
    assert set(run.gradings.values("group").annotate(n=Count("id")).values_list("n", flat=True)) == {1}
    grader_runs = run.gradings.aggregate(n=Sum("attempts"))["n"]
    assert grader_runs == GROUPS + held  # only the killed worker's claims were graded again
    print(f"\nchaos: {GROUPS} mixed groups, 1 worker killed holding {held} claims, broker stopped 5 s; "
          f"every group graded once {recovered:.1f} s after the kill; {grader_runs} grader runs")
