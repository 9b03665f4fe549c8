"""On Redis a worker takes a waiting grading before the derived data queued ahead of it on the
cpu queue (an import's render, search index and figures; a large batch's figures asked for
again), so an online step is not graded behind them (docs/performance.md, "While another
step's figures are computed")."""

import re

import pytest

from tests.workers.conftest import make_batch, wait_until
from webapp.grading.services import grading_launch
from webapp.models import Grading

pytestmark = pytest.mark.django_db(transaction=True)

SUCCEEDED = re.compile(r"Task workers\.tasks\.(\w+)\[[^]]+\] succeeded in ")


def test_a_worker_grades_before_the_derived_data_queued_ahead(tmp_path, redis_broker, workers):
    make_batch(tmp_path, "other", 3)  # each import queues its render, index and figures: no worker yet
    step = make_batch(tmp_path, "step", 3)
    run = grading_launch(batch=step, grader="heuristic").run  # one grading message, sent last
    worker = workers(redis_broker, concurrency=1)  # one process: tasks run in the order it takes them

    def ran() -> list[str]:
        return SUCCEEDED.findall(worker.log.read_text(errors="replace"))

    wait_until(lambda: len(ran()) >= 7, timeout=60, message=worker.output())
    assert ran()[0] == "grade", ran()
    assert set(run.gradings.values_list("status", flat=True)) == {Grading.Status.DONE}
    assert {"render", "search_index", "run_figures"} <= set(ran()[1:])
