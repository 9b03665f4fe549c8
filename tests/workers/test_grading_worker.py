"""Grading through real worker processes: redelivered tasks, lost workers, failing graders."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Count, Max
from django.utils import timezone

from tests.factories import PATCH, SAMPLE_ROLLOUTS, group, write_jsonl
from tests.workers.conftest import SCRIPTED, make_batch, wait_until
from webapp import work
from webapp.advantages.selectors import advantage_rows
from webapp.grading.services import GRADINGS, grading_launch, gradings_sweep
from webapp.grading.worker import gradings_process
from webapp.models import Batch, Grading
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db(transaction=True)

DONE, FAILED, RUNNING = Grading.Status.DONE, Grading.Status.FAILED, Grading.Status.RUNNING


def counts(run):
    return dict(run.gradings.values_list("status").annotate(n=Count("id")))


def finished(run):
    return lambda: not run.gradings.exclude(status__in=[DONE, FAILED]).exists()


def assert_each_group_done_once(run, n):
    assert counts(run) == {DONE: n}
    per_group = run.gradings.values("group").annotate(n=Count("id"), done=Count("id")).values_list("n", flat=True)
    assert len(per_group) == n and set(per_group) == {1}
    assert not run.gradings.filter(attempts=0).exists()


def test_the_embedded_default_grades_the_sample_with_a_real_worker(filesystem_broker, workers):
    call_command("import_rollouts", str(SAMPLE_ROLLOUTS), batch="sample", verbosity=0)
    batch = Batch.objects.get(name="sample")
    workers(filesystem_broker)
    launch = grading_launch(batch=batch, grader="heuristic")
    assert launch.queued == batch.groups.filter(label="mixed").count() > 0

    wait_until(finished(launch.run), timeout=30, message=str(counts(launch.run)))
    assert_each_group_done_once(launch.run, launch.queued)
    graded = [row for row in advantage_rows(batch, viewer=UNRESTRICTED) if row["label"] == "mixed"]
    assert {row["source"] for row in graded} == {"grader"}
    assert all(row["rank"] for row in graded if row["passed"])
    launch.run.refresh_from_db()
    assert launch.run.grader_version.startswith("heuristic-1-")


def test_a_grader_that_raises_on_one_group_fails_that_group_and_grades_the_rest(tmp_path, redis_broker, workers):
    batch = make_batch(tmp_path, "b", 12)
    workers(redis_broker)
    launch = grading_launch(batch=batch, grader=SCRIPTED, config={"fail_on": "b-0007$"})

    wait_until(finished(launch.run), timeout=30, message=str(counts(launch.run)))
    assert counts(launch.run) == {DONE: 11, FAILED: 1}
    failed = launch.run.gradings.get(status=FAILED)
    assert failed.group.group_id == "b-0007"
    assert failed.error == "cannot grade b-0007: <script>alert(1)</script> is not a patch"
    assert failed.attempts == 1  # permanent: not retried


def test_grade_wait_shows_progress_and_exits_non_zero_when_a_group_failed(tmp_path, redis_broker, workers, capsys):
    make_batch(tmp_path, "b", 4)
    workers(redis_broker)
    with pytest.raises(CommandError, match="1 of 4 groups failed"):
        call_command("grade", batch="b", grader=SCRIPTED, config='{"fail_on": "b-0002$"}', wait=True, timeout=30)
    out, err = capsys.readouterr()
    assert "4 groups queued on 'gpu'" in out  # a grader not in GAGAR_GRADER_QUEUES goes to gpu
    assert "done 3" in out and "failed 1" in out
    assert "failed b-0002: cannot grade b-0002" in err


def test_redelivering_a_finished_task_changes_nothing(tmp_path, redis_broker, workers):
    batch = make_batch(tmp_path, "b", 6)
    workers(redis_broker, concurrency=1)
    launch = grading_launch(batch=batch, grader="heuristic")
    wait_until(finished(launch.run), timeout=30)
    before = list(launch.run.gradings.order_by("pk").values())
    ids = [row["id"] for row in before]

    assert gradings_process(grading_ids=ids).claimed == []  # in this process
    work.enqueue(GRADINGS, ids, "cpu")  # and the same message to the worker, then a sentinel behind it
    sentinel = grading_launch(batch=make_batch(tmp_path, "s", 1), grader="heuristic")
    wait_until(finished(sentinel.run), timeout=30)

    assert list(launch.run.gradings.order_by("pk").values()) == before


def test_a_grader_is_handed_each_group_as_it_was_imported(tmp_path, filesystem_broker):
    records = group("e-0001", [1, 0, 1])
    records[0].update(metrics={"num_turns": 7}, tests={"passed": ["test_f"], "log": "ok"},
                      messages=[{"role": "user", "content": "fix f"}])
    call_command("import_rollouts", str(write_jsonl(tmp_path / "e.jsonl", records)), batch="e", verbosity=0)
    launch = grading_launch(batch=Batch.objects.get(name="e"), grader="tests.workers.graders:EchoGrader")
    assert gradings_process(grading_ids=list(launch.run.gradings.values_list("pk", flat=True))).done

    seen = json.loads(launch.run.gradings.get().rationales["t1"])
    bare = {"messages": None, "tests": None, "metrics": {}, "patch": PATCH}
    assert seen == {"group_id": "e-0001", "statement": "Fix e-0001", "repo": "o/r", "trajectories": [
        {"trajectory_id": "t1", "passed": True, "reward": 1.0, "patch": PATCH, "metrics": {"num_turns": 7},
         "tests": {"passed": ["test_f"], "log": "ok"}, "messages": [{"role": "user", "content": "fix f"}]},
        {**bare, "trajectory_id": "t2", "passed": False, "reward": 0.0},
        {**bare, "trajectory_id": "t3", "passed": True, "reward": 1.0},
    ], "execution": None, "no_execution": "no codebase store is configured (GAGAR_CODEBASES)", "code": None,
        "no_code": ""}


def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's own tables")


def other_sessions() -> dict[int, object]:
    """Each other open client connection to the test database: pid -> when it was opened."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE datname = current_database()"
                       " AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
        return dict(cursor.fetchall())


@pytest.mark.parametrize("conn_max_age", [300, 0])
def test_a_worker_keeps_its_database_connection_between_tasks_for_conn_max_age(
        tmp_path, redis_broker, workers, settings, conn_max_age):
    postgresql_only()
    settings.GAGAR_GRADING_CHUNK = 2
    batch = make_batch(tmp_path, "c", 6)
    earlier = set(other_sessions())  # left by earlier tests' threads or processes, not this worker's

    def worker_sessions():
        return [started for pid, started in other_sessions().items() if pid not in earlier]

    workers({**redis_broker, "DB_CONN_MAX_AGE": str(conn_max_age)}, concurrency=1)
    launch = grading_launch(batch=batch, grader="heuristic")
    wait_until(finished(launch.run), timeout=30)

    if conn_max_age:  # one connection, opened by the first task, served all three
        sessions = worker_sessions()
        assert len(sessions) == 1
        assert sessions[0] < launch.run.gradings.aggregate(last=Max("claimed_at"))["last"]
    else:  # closed after each task, as Celery does by default
        wait_until(lambda: not worker_sessions(), timeout=10, message=str(worker_sessions()))


def test_a_large_launch_brings_postgresqls_statistics_of_gradings_up_to_date(tmp_path, filesystem_broker,
                                                                               monkeypatch):
    postgresql_only()
    monkeypatch.setattr("webapp.grading.services.ANALYZE_AFTER", 5)
    launch = grading_launch(batch=make_batch(tmp_path, "a", 5), grader="heuristic")
    with connection.cursor() as cursor:  # the estimate that decides how a claim finds its rows
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [Grading._meta.db_table])
        assert cursor.fetchone()[0] == launch.queued == 5


def test_the_sweep_requeues_a_grading_whose_lease_ran_out(tmp_path, redis_broker, workers):
    batch = make_batch(tmp_path, "b", 3)
    launch = grading_launch(batch=batch, grader="heuristic")
    # As if a worker had claimed one and died before the broker could tell anyone.
    lost = launch.run.gradings.order_by("pk").first()
    assert gradings_process(grading_ids=[lost.pk]).claimed == [lost.pk]
    Grading.objects.filter(pk=lost.pk).update(status=RUNNING, claim_token="dead-worker", finished_at=None,
                                              lease_expires_at=timezone.now())
    workers(redis_broker)
    wait_until(lambda: launch.run.gradings.filter(status=DONE).count() == 2, timeout=30)

    assert gradings_sweep().requeued == 1
    wait_until(finished(launch.run), timeout=30)
    lost.refresh_from_db()
    assert (lost.status, lost.attempts) == (DONE, 2)
