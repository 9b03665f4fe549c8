"""A broker that is down when grading is launched, retried or swept: the gradings are kept
unsent, the user is told, and the sweep sends them once the broker is back.

The broker is a redis-server of the test's own (`redis_server`), stopped and started again;
settings are the defaults unless a test says otherwise."""

import time
from datetime import timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from tests.workers.conftest import SCRIPTED, make_batch, wait_until
from webapp.grading.services import grading_launch, gradings_retry_failed, gradings_sweep
from webapp.grading.worker import gradings_process
from webapp.models import Grading

pytestmark = pytest.mark.django_db(transaction=True)

QUEUED, DONE, FAILED = Grading.Status.QUEUED, Grading.Status.DONE, Grading.Status.FAILED


def unsent(run):
    return run.gradings.filter(status=QUEUED, sent_at=None).count()


def messages_on(server, queue) -> int:
    return redis.Redis(port=server.port).llen(queue)


def test_a_launch_while_the_broker_is_down_says_so_and_is_graded_within_a_minute_of_its_return(
        tmp_path, client, researcher, redis_server, own_broker, workers, capsys):
    batch = make_batch(tmp_path, "b", 6)
    redis_server.stop()
    client.force_login(researcher)

    response = client.post(reverse("grading_launch", args=[batch.pk]), {"grader": "heuristic"}, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Queued 6 groups for heuristic, but the broker is unreachable" in page
    assert "they are sent as soon as it is back" in page
    run = batch.grading_runs.get()
    assert unsent(run) == 6

    redis_server.start()
    back = time.monotonic()
    workers(own_broker)
    workers(own_broker, beat=True, log="beat.log")
    wait_until(lambda: run.gradings.filter(status=DONE).count() == 6, timeout=60, every=0.5,
               message=f"{unsent(run)} still unsent")
    print(f"\nbroker back -> 6 groups graded: {time.monotonic() - back:.1f} s")
    assert not run.gradings.exclude(attempts=1).exists()


def test_the_grade_and_sweep_commands_say_the_broker_is_down_without_a_traceback(
        tmp_path, redis_server, own_broker, capsys):
    batch = make_batch(tmp_path, "b", 3)
    redis_server.stop()

    call_command("grade", batch="b")
    out = capsys.readouterr().out
    assert "3 groups queued on 'cpu'" in out
    assert "not sent yet: the broker is unreachable (Error 111 connecting" in out
    assert "the sweep sends them once it is back" in out
    with pytest.raises(CommandError, match=r"the broker is unreachable .*: 3 gradings wait to be sent"):
        call_command("sweep_gradings")
    assert unsent(batch.grading_runs.get()) == 3

    redis_server.start()
    call_command("sweep_gradings")
    assert "3 sent" in capsys.readouterr().out
    assert unsent(batch.grading_runs.get()) == 0
    assert messages_on(redis_server, "cpu") == 1  # one task of up to GAGAR_GRADING_CHUNK gradings


def test_a_transient_retry_while_the_broker_is_down_is_kept_for_the_sweep(tmp_path, redis_server, own_broker):
    run = grading_launch(batch=make_batch(tmp_path, "b", 1), grader=SCRIPTED, config={"transient_on": "b-"}).run
    grading = run.gradings.get()
    redis_server.stop()

    assert gradings_process(grading_ids=[grading.pk]).retrying == [grading.pk]
    grading.refresh_from_db()
    assert (grading.status, grading.sent_at) == (QUEUED, None)

    redis_server.start()
    assert gradings_sweep().sent == 1
    assert messages_on(redis_server, "gpu") == 1


def test_retrying_failed_gradings_while_the_broker_is_down_says_so_and_keeps_them_for_the_sweep(
        tmp_path, redis_server, own_broker):
    batch = make_batch(tmp_path, "b", 2)
    run = grading_launch(batch=batch, grader=SCRIPTED, config={"fail_on": "b-0001"}).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    redis_server.stop()

    retry = gradings_retry_failed(batch=batch)
    assert retry.queued == 1 and "the broker is unreachable" in retry.broker_error
    assert unsent(run) == 1

    redis_server.start()
    assert gradings_sweep().sent == 1
    assert unsent(run) == 0


def test_the_sweep_resends_the_gradings_of_a_queue_the_broker_lost(tmp_path, redis_server, own_broker):
    """A restarted broker forgot every message: the queue is empty, yet gradings wait in it."""
    batch = make_batch(tmp_path, "b", 3)
    before = messages_on(redis_server, "cpu")
    run = grading_launch(batch=batch, grader="heuristic").run
    assert messages_on(redis_server, "cpu") == before + 1
    gradings_sweep()  # the first on this Redis: it may have lost messages sent to an earlier one
    assert gradings_sweep().sent == 0  # the message is there: nothing to resend

    redis_server.stop()
    redis_server.start()
    assert messages_on(redis_server, "cpu") == 0
    assert gradings_sweep().sent == 3
    assert messages_on(redis_server, "cpu") == 1
    assert gradings_sweep().sent == 0
    assert not run.gradings.filter(sent_at=None).exists()


def test_after_a_redis_restart_the_sweep_resends_at_once_what_no_worker_claimed_however_busy_the_queue(
        tmp_path, redis_server, own_broker, workers, settings):
    settings.GAGAR_GRADING_CHUNK = 1  # a message per grading: the queue after the restart holds many
    lost = grading_launch(batch=make_batch(tmp_path, "lost", 4), grader="heuristic").run
    gradings_sweep()
    assert gradings_sweep().sent == 0

    redis_server.stop()
    redis_server.start()
    busy = grading_launch(batch=make_batch(tmp_path, "busy", 40), grader="heuristic").run
    assert messages_on(redis_server, "cpu") == 40  # not empty, and sent a moment ago: nothing looks lost
    sweep = gradings_sweep()
    assert sweep.sent == 44  # the 4 lost, and the 40 sent since the restart a second time
    assert messages_on(redis_server, "cpu") == 84
    assert gradings_sweep().sent == 0  # once per restart

    workers(own_broker)
    graded = Grading.objects.filter(run__in=[lost, busy], status=DONE)
    wait_until(lambda: graded.count() == 44, timeout=60, every=0.5, message=f"{graded.count()} of 44 graded")
    assert not Grading.objects.filter(run__in=[lost, busy]).exclude(attempts=1).exists()  # copies claim nothing
    wait_until(lambda: messages_on(redis_server, "cpu") == 0, timeout=30, message="copies left in the queue")


def test_deployments_sharing_a_redis_each_resend_what_its_restart_lost(tmp_path, redis_server, own_broker):
    """Each deployment's sweep keeps its mark under its CELERY_REDIS_KEYPREFIX: the first to sweep
    after a restart does not hide the restart from the other. (Both deployments here share the
    test's database, so each sends both's gradings, to its own queue.)"""
    from webapp.jobs import configure

    def sweep_as(prefix):
        with override_settings(CELERY_REDIS_KEYPREFIX=prefix):
            configure(django_settings)
            try:
                return gradings_sweep()
            finally:
                configure(django_settings)

    grading_launch(batch=make_batch(tmp_path, "b", 2), grader="heuristic")
    for prefix in ("one:", "two:"):
        sweep_as(prefix)
        assert sweep_as(prefix).sent == 0

    redis_server.stop()
    redis_server.start()
    for prefix in ("one:", "two:"):
        assert sweep_as(prefix).sent == 2
        assert messages_on(redis_server, f"{prefix}cpu") == 1


def test_the_filesystem_broker_keeps_its_messages_so_the_sweep_resends_none(tmp_path, filesystem_broker):
    run = grading_launch(batch=make_batch(tmp_path, "b", 3), grader="heuristic").run
    assert gradings_sweep().sent == 0
    run.gradings.update(sent_at=timezone.now() - timedelta(minutes=5))
    assert gradings_sweep().sent == 0  # its message waits in the queue's folder: nothing was lost
