"""On Redis a worker takes a waiting grading before the derived data queued ahead of it on the
cpu queue (an import's render, search index and figures; a large batch's figures asked for
again), so an online step is not graded behind them (docs/performance.md, "While another
step's figures are computed"), and an online step's gradings are sent before its import's
derived data, so an idle worker takes them first."""

import re

import pytest
from django.contrib.auth.models import User

from tests.factories import group, write_jsonl
from tests.workers.conftest import make_batch, wait_until
from webapp.api.services import step_submit
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


def test_an_online_steps_gradings_go_out_before_its_imports_derived_data(tmp_path, redis_broker, workers):
    # An idle worker takes the first message sent, whatever its priority: the step's import asks
    # for its render, index and figures before its launch asks for gradings, and the trainer
    # waits for the gradings only.
    user = User.objects.create_user("trainer")
    worker = workers(redis_broker, concurrency=1)  # started, idle
    records = [record for i in range(3) for record in group(f"task-{i}", [1, 1, 0])]
    submitted = step_submit(path=write_jsonl(tmp_path / "step.jsonl", records), run="trl", step=0,
                            grader="heuristic", config=None, user=user, pass_threshold=None)

    def ran() -> list[str]:
        return SUCCEEDED.findall(worker.log.read_text(errors="replace"))

    wait_until(lambda: len(ran()) >= 4, timeout=60, message=worker.output())
    assert ran()[0] == "grade", ran()
    assert {"render", "search_index", "run_figures"} <= set(ran()[1:])
    assert set(Grading.objects.filter(group__batch=submitted.batch).values_list("status", flat=True)) == {"done"}
