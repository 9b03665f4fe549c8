"""Exports recover from a lost worker as gradings do: an export a killed worker had claimed
(its lease runs out) or only taken (its message dies unacknowledged with the worker) is
sent again by the sweep and built by another worker; one that runs past its own soft time
limit is tried again, then fails with the reason."""

import json
import time

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from tests.webapp.exports.conftest import data_dir  # noqa: F401  (autouse: exports of this test's own)
from tests.workers.conftest import Worker, make_batch, wait_until
from webapp.exports.selectors import exports_root
from webapp.exports.services import export_launch
from webapp.jobs import EXPORT_TASK, app, broker_options
from webapp.models import Export
from workers import tasks

pytestmark = pytest.mark.django_db(transaction=True)


class Prefetching(Worker):
    """A worker that takes a second message while it runs one: the state in which a lost
    worker takes down a message it never started (prefetched, or handed to a process that
    died before it claimed the row)."""

    def command(self) -> list[str]:
        return [*super().command(), "--prefetch-multiplier", "2"]


def waiting_tasks(server, queue: str) -> list[str]:
    """The task names of the messages that wait in `queue` on the Redis of `server`."""
    return [json.loads(m)["headers"]["task"] for m in redis.Redis(port=server.port).lrange(queue, 0, -1)]


def rows(*exports) -> list[tuple]:
    return list(Export.objects.filter(pk__in=[e.pk for e in exports]).order_by("pk")
                .values_list("status", "attempts", "rows_done", "error"))


@pytest.mark.slow
def test_exports_a_killed_worker_claimed_or_only_took_are_built_by_another_within_two_minutes(
        tmp_path, redis_server, own_broker, workers, researcher):
    """With the default settings (lease, heartbeat, sweep interval, and Redis' visibility
    timeout of two hours, which would hold the taken message that long)."""
    batch = make_batch(tmp_path, "k", 300)
    slow = {**own_broker, "GAGAR_EXPORT_CHUNK_GROUPS": "1"}  # a chunk per group: the kill lands midway
    workers(own_broker, beat=True, log="beat.log")
    claimed = export_launch(batch=batch, kind="advantages", format="jsonl", config={}, user=researcher)
    taken = export_launch(batch=batch, kind="advantages", format="parquet", config={}, user=researcher)
    # The two exports are what this worker takes: the import's derived data (renders, index,
    # figures) wait on their own queue.
    doomed = Prefetching(slow, tmp_path / "doomed.log", concurrency=1, queues="cpu").start()
    wait_until(lambda: Export.objects.get(pk=claimed.pk).rows_done > 0, timeout=60, every=0.01,
               message=doomed.output())
    doomed.kill()
    killed = time.monotonic()
    (running, *_), (queued, *_) = rows(claimed, taken)
    assert (running, queued) == ("running", "queued") and Export.objects.get(pk=taken.pk).sent_at is not None
    assert EXPORT_TASK not in waiting_tasks(redis_server, "cpu")  # the taken one's message died with the worker

    workers(own_broker, log="survivor.log")
    wait_until(lambda: {status for status, *_ in rows(claimed, taken)} == {"done"}, timeout=120, every=0.5,
               message="the exports of the killed worker were not built within two minutes")
    recovered = time.monotonic() - killed
    assert [attempts for _, attempts, *_ in rows(claimed, taken)] == [2, 1]
    assert sorted(p.name for p in exports_root().iterdir()) == sorted([str(claimed.pk), str(taken.pk)])
    print(f"\nthe export a killed worker claimed and the one it only took: both built {recovered:.1f} s after "
          "the kill")


def test_an_export_past_its_soft_time_limit_is_tried_again_then_fails_saying_so(
        tmp_path, redis_broker, workers, researcher):
    batch = make_batch(tmp_path, "long", 1000)
    workers({**redis_broker, "GAGAR_EXPORT_CHUNK_GROUPS": "1", "GAGAR_EXPORT_SOFT_TIME_LIMIT": "1",
             "GAGAR_EXPORT_TIME_LIMIT": "30", "GAGAR_EXPORT_MAX_ATTEMPTS": "2"}, concurrency=1)
    export = export_launch(batch=batch, kind="advantages", format="jsonl", config={}, user=researcher)
    wait_until(lambda: rows(export)[0][0] in ("done", "failed"), timeout=60, message=str(rows(export)))
    status, attempts, _, error = rows(export)[0]
    assert (attempts, error) == (2, "gave up after 2 attempts: the last one ran past its soft time limit (1 s)")
    # The worker removes its folder once it has written the row.
    wait_until(lambda: not any(exports_root().iterdir()), timeout=10, message="a half-built folder was left")


def test_the_export_task_has_time_limits_of_its_own_below_redis_redelivery():
    task = app.tasks[EXPORT_TASK]
    assert task.name == tasks.export.name
    assert (task.soft_time_limit, task.time_limit) == (settings.GAGAR_EXPORT_SOFT_TIME_LIMIT,
                                                       settings.GAGAR_EXPORT_TIME_LIMIT)
    assert task.soft_time_limit < task.time_limit
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:6379/0"):
        assert broker_options(settings)["visibility_timeout"] > task.time_limit
