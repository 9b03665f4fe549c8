"""Simultaneous launches of the same grading (a double click, two people, three shells) make
one run: the busy check and the run it creates are taken under one lock."""

import subprocess
import sys
import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from tests.workers.conftest import ROOT, make_batch
from webapp.models import Grading, GradingRun

pytestmark = pytest.mark.django_db(transaction=True)


def at_once(n, action):
    """Run `action(i)` in `n` threads released together; return their results by i."""
    start = threading.Barrier(n)
    results = [None] * n

    def run(i):
        try:
            start.wait()
            results[i] = action(i)
        finally:
            connection.close()  # each thread's own connection

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_four_simultaneous_launch_posts_make_one_run_and_tell_the_others_which(
        tmp_path, researcher, filesystem_broker):
    batch = make_batch(tmp_path, "b", 40)
    url = reverse("grading_launch", args=[batch.pk])

    def post(i):
        client = Client()
        client.force_login(researcher)
        response = client.post(url, {"grader": "heuristic"}, follow=True)
        return response.status_code, response.content.decode()

    answers = at_once(4, post)
    run = GradingRun.objects.get()
    assert run.gradings.count() == 40 and Grading.objects.count() == 40
    assert {status for status, _ in answers} == {200}
    bodies = [body for _, body in answers]
    assert sum("Queued 40 groups for heuristic." in body for body in bodies) == 1
    busy = f"Nothing to grade: run #{run.pk} (heuristic) is already grading these groups (40 queued or running)."
    assert sum(busy in body for body in bodies) == 3


def test_three_simultaneous_grade_commands_make_one_run(tmp_path, filesystem_broker):
    batch = make_batch(tmp_path, "b", 30)
    command = [sys.executable, "manage.py", "grade", "--batch", "b", "--grader", "heuristic"]
    shells = [subprocess.Popen(command, cwd=ROOT, env=filesystem_broker, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for _ in range(3)]
    outputs = [shell.communicate(timeout=120)[0] for shell in shells]
    assert [shell.returncode for shell in shells] == [0, 0, 0], outputs

    run = batch.grading_runs.get()
    assert run.gradings.count() == 30
    assert sum(f"run {run.pk}: 30 groups queued on 'cpu'" in out for out in outputs) == 1
    assert sum(f"nothing to grade: run {run.pk} (heuristic) is already grading these groups" in out
               for out in outputs) == 2


def test_launches_of_different_graders_on_one_batch_both_run(tmp_path, filesystem_broker):
    from webapp.grading.services import grading_launch

    batch = make_batch(tmp_path, "b", 5)
    graders = ["heuristic", "tests.workers.graders:EchoGrader"]
    launches = at_once(2, lambda i: grading_launch(batch=batch, grader=graders[i]))
    assert sorted(launch.queued for launch in launches) == [5, 5]
    assert batch.grading_runs.count() == 2

