"""Claims are leases: a worker renews them while it grades, and the sweep re-queues the
gradings of a worker whose lease ran out (killed, lost with its machine)."""

import time

import pytest
from django.db.models import Count, Max, Sum

from tests.workers.conftest import SCRIPTED, make_batch, wait_until
from webapp.grading.services import grading_launch, gradings_sweep
from webapp.models import Grading

pytestmark = pytest.mark.django_db(transaction=True)

QUEUED, RUNNING, DONE = Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE


@pytest.mark.slow
def test_a_grading_longer_than_its_lease_keeps_it_while_its_worker_is_alive(tmp_path, own_broker, workers):
    # Short leases so the test is short: the grading takes four leases, renewed by heartbeats
    # ten times a lease, so that a loaded machine's late heartbeat does not lose one.
    workers({**own_broker, "GAGAR_GRADING_LEASE": "2", "GAGAR_GRADING_HEARTBEAT": "0.2"})
    run = grading_launch(batch=make_batch(tmp_path, "b", 1), grader=SCRIPTED, config={"delay": 8}).run
    grading = run.gradings.get()
    wait_until(lambda: run.gradings.filter(status=RUNNING).exists(), timeout=30, every=0.05)
    claimed = run.gradings.values_list("claimed_at", flat=True).get()

    leases = set()
    while not run.gradings.filter(status=DONE).exists():
        assert gradings_sweep().requeued == 0
        leases.add(run.gradings.values_list("lease_expires_at", flat=True).get())
        time.sleep(0.2)
    grading.refresh_from_db()
    assert (grading.status, grading.attempts) == (DONE, 1)
    renewed = sorted(lease for lease in leases if lease is not None)
    assert len(renewed) >= 5 and (renewed[-1] - claimed).total_seconds() > 7


@pytest.mark.slow
def test_after_a_sigkill_another_worker_grades_every_claimed_group_once_within_two_minutes(
        tmp_path, own_broker, workers):
    """With the default settings: the lease, the heartbeat and the sweep's interval."""
    batch = make_batch(tmp_path, "k", 120)  # three tasks of GAGAR_GRADING_CHUNK = 50 groups
    workers(own_broker, beat=True, log="beat.log")
    doomed = workers(own_broker, concurrency=2)
    run = grading_launch(batch=batch, grader=SCRIPTED, config={"delay": 0.2}).run
    wait_until(lambda: run.gradings.filter(status=RUNNING).count() >= 100, timeout=30, every=0.05)

    doomed.kill()
    killed = time.monotonic()
    claimed = set(run.gradings.filter(status=RUNNING).values_list("pk", flat=True))
    workers(own_broker, log="worker-2.log")
    wait_until(lambda: run.gradings.filter(status=DONE).count() == 120, timeout=120, every=0.5,
               message=str(dict(run.gradings.values_list("status").annotate(n=Count("id")))))
    recovered = time.monotonic() - killed

    per_group = set(run.gradings.values("group").annotate(n=Count("id")).values_list("n", flat=True))
    assert per_group == {1} and run.gradings.count() == 120
    stats = run.gradings.aggregate(most=Max("attempts"), runs=Sum("attempts"))
    assert set(run.gradings.filter(pk__in=claimed).values_list("attempts", flat=True)) == {2}
    assert stats == {"most": 2, "runs": 120 + len(claimed)}
    print(f"\n120 groups, 1 kill holding {len(claimed)} claims, recovered in {recovered:.1f} s, "
          f"{stats['runs']} grader runs")
