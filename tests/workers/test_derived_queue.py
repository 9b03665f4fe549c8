"""Derived data (an import's render, search index, figures and grading panel; a large batch's
figures asked for again) wait on a queue of their own, so a worker of the cpu queue never runs
them while a grading waits (docs/performance.md, "While another step's figures are computed");
and an online step's gradings are sent before its import's derived data, so that a worker
serving both queues takes them first."""

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


def ran(worker) -> list[str]:
    return SUCCEEDED.findall(worker.log.read_text(errors="replace"))


def test_a_cpu_worker_grades_and_leaves_derived_data_to_the_derived_queues_workers(tmp_path, redis_broker,
                                                                                    workers):
    make_batch(tmp_path, "other", 3)  # each import queues its render, index and figures: no worker yet
    step = make_batch(tmp_path, "step", 3)
    run = grading_launch(batch=step, grader="heuristic").run  # one grading message, sent last
    cpu = workers(redis_broker, concurrency=1, queues="cpu", log="cpu.log")
    # The worker logs a task once it has returned, a moment after its gradings are done: wait for the log.
    wait_until(lambda: ran(cpu), timeout=60, message=cpu.output())
    assert run.gradings.filter(status=Grading.Status.DONE).count() == 3
    assert set(ran(cpu)) == {"grade"}, ran(cpu)

    derived = workers(redis_broker, concurrency=1, queues="derived", log="derived.log")
    # two imports x (render, index, figures: the run page's and the grading panel's in one task);
    # the grading's ask for figures joins the ones pending
    wait_until(lambda: len(ran(derived)) >= 6, timeout=60, message=derived.output())
    assert set(ran(derived)) == {"render", "search_index", "batch_figures"}, ran(derived)
    assert set(ran(cpu)) == {"grade"}


def test_an_online_steps_gradings_go_out_before_its_imports_derived_data(tmp_path, redis_broker, workers):
    # An idle worker takes the first message sent: the step's import asks for its render, index
    # and figures before its launch asks for gradings, and the trainer waits for the gradings only.
    user = User.objects.create_user("trainer")
    worker = workers(redis_broker, concurrency=1)  # started, idle, on every queue
    records = [record for i in range(3) for record in group(f"task-{i}", [1, 1, 0])]
    submitted = step_submit(path=write_jsonl(tmp_path / "step.jsonl", records), run="trl", step=0,
                            grader="heuristic", config=None, user=user, pass_threshold=None)
    wait_until(lambda: len(ran(worker)) >= 4, timeout=60, message=worker.output())
    assert ran(worker)[0] == "grade", ran(worker)
    assert {"render", "search_index", "batch_figures"} <= set(ran(worker)[1:])
    assert set(Grading.objects.filter(group__batch=submitted.batch).values_list("status", flat=True)) == {"done"}
