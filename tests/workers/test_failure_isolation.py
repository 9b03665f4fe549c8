"""A task that fails (a MemoryError above all) fails alone: the worker lives on and takes the
next task, the job records why, and its message is not handed to the next worker.

The worker runs tests/workers/memory_app.py: the app with every batch named "huge-..." out of
memory when its groups are loaded for grading, its patches rendered or its audit figures
computed. Before, Celery's worker process re-raised the MemoryError a pool process reported
and exited ("Unrecoverable error"), and a restarted worker took the same message and died."""

import pytest
from django.db import transaction

from tests.workers.conftest import make_batch, wait_until
from webapp.audit import figures, refresh
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.models import AuditFigures, Grading
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db(transaction=True)

APP = "tests.workers.memory_app"
TOO_BIG = "Unable to allocate 6.13 TiB"


def finished(run) -> bool:
    return not run.gradings.exclude(status__in=[Grading.Status.DONE, Grading.Status.FAILED]).exists()


def test_a_task_out_of_memory_fails_alone_and_the_worker_takes_the_next(tmp_path, filesystem_broker, workers):
    huge = make_batch(tmp_path, "huge", 3)  # its import sends its render: out of memory, first in the queue
    doomed = grading_launch(batch=huge, grader="heuristic").run
    small = make_batch(tmp_path, "small", 3)
    fine = grading_launch(batch=small, grader="heuristic").run
    worker = workers(filesystem_broker, concurrency=1, app=APP)
    wait_until(lambda: finished(fine) and finished(doomed), timeout=60, every=0.5,
               message=f"the gradings behind the huge batch's tasks:\n{worker.output()}")
    assert worker.proc.poll() is None, worker.output()
    assert set(fine.gradings.values_list("status", flat=True)) == {Grading.Status.DONE}
    for status, error in doomed.gradings.values_list("status", "error"):
        assert status == Grading.Status.FAILED and error.startswith(f"MemoryError: {TOO_BIG}")
    log = worker.output()
    assert "Unrecoverable error" not in log, log[max(0, log.find("Unrecoverable error") - 3000):]
    assert "task render(batch_id=" in log and TOO_BIG in log, log

    graded = make_batch(tmp_path, "huge-graded", 2)  # graded here, where nothing runs out of memory
    with transaction.atomic():  # graded before its messages go out: the idle worker would run out of memory
        gradings_process(grading_ids=list(grading_launch(batch=graded, grader="heuristic").run.gradings
                                          .values_list("pk", flat=True)))
    for batch in (graded, small):  # the first views queue the figures: the huge batch's run out of memory
        figures.dashboard(batch, figures.grader_versions(batch), all_versions=figures.grader_versions(batch),
                          viewer=UNRESTRICTED)
    wait_until(lambda: not AuditFigures.objects.exclude(requested_at=None).exists(), timeout=30, every=0.5,
               message=f"the figures' recompute:\n{worker.output()}")
    version = figures.grader_versions(graded)[0].version
    failed = AuditFigures.objects.get(key=refresh.part_key("gradings", graded.pk, version))
    assert refresh.failure(failed.payload).startswith(f"MemoryError: {TOO_BIG}")
    assert figures.dashboard(small, figures.grader_versions(small), all_versions=figures.grader_versions(small),
                             viewer=UNRESTRICTED).versions[0].ranking.graded == 3

    again = make_batch(tmp_path, "after", 2)  # the same worker still takes new work
    run = grading_launch(batch=again, grader="heuristic").run
    wait_until(lambda: finished(run), timeout=30, every=0.5, message=worker.output())
    assert worker.proc.poll() is None and set(run.gradings.values_list("status", flat=True)) == {"done"}


def test_a_lost_worker_hands_no_cache_task_to_the_next_one():
    """Killed mid-task (out of memory), a render, an index or a figures recompute is dropped, not
    redelivered into the next worker; their sweeps make up for it. Claimed work is redelivered."""
    from webapp.jobs import AUDIT_FIGURES_TASK, EXPORT_TASK, GRADE_TASK, RENDER_TASK, SEARCH_INDEX_TASK, app
    from workers import tasks  # noqa: F401 (registers the tasks, whatever ran before)

    assert app.conf.task_reject_on_worker_lost
    assert not any(app.tasks[name].reject_on_worker_lost for name in (RENDER_TASK, SEARCH_INDEX_TASK,
                                                                       AUDIT_FIGURES_TASK))
    assert all(app.tasks[name].reject_on_worker_lost in (None, True) for name in (GRADE_TASK, EXPORT_TASK))
