"""A run cancelled while a real worker grades it: what is queued is never graded."""

import re

import pytest
from django.db.models import Count
from django.test import override_settings

from tests.workers.conftest import SCRIPTED, make_batch, wait_until
from webapp.grading.selectors import batch_grading_status
from webapp.grading.services import grading_launch, grading_run_cancel
from webapp.models import Grading
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db(transaction=True)

DONE, CANCELLED = Grading.Status.DONE, Grading.Status.CANCELLED


def test_a_cancelled_run_grades_nothing_more_in_a_real_worker(tmp_path, redis_broker, workers, researcher):
    batch = make_batch(tmp_path, "b", 10)
    worker = workers(redis_broker, concurrency=1)
    with override_settings(GAGAR_GRADING_CHUNK=1):  # a message per grading: the worker takes them one by one
        run = grading_launch(batch=batch, grader=SCRIPTED, config={"delay": 0.4}).run
    wait_until(lambda: run.gradings.filter(status=DONE).exists(), timeout=30, message="nothing graded")
    cancelled = grading_run_cancel(run=run, user=researcher)
    assert cancelled >= 5
    wait_until(lambda: not batch_grading_status(batch, viewer=UNRESTRICTED)[0].active, timeout=30,
               message="the run never settled")
    # The cancelled gradings' messages still reach the worker, which claims nothing from them.
    graded = re.compile(r"Task workers\.tasks\.grade\[[^]]+\] succeeded in ")
    wait_until(lambda: len(graded.findall(worker.log.read_text(errors="replace"))) == 10, timeout=30,
               message=worker.output())
    counts = dict(run.gradings.values_list("status").annotate(n=Count("id")))
    assert counts[CANCELLED] == cancelled and counts[DONE] == 10 - cancelled
    assert not run.gradings.filter(status=CANCELLED, attempts__gt=0).exists()
    assert batch_grading_status(batch, viewer=UNRESTRICTED)[0].state == "cancelled"
