"""The Celery app, its queues and task names: what the web app sends and workers run.

Defined here, on the web app's side, so that `webapp` never imports `workers`:
services send tasks by name (GRADE_TASK, SWEEP_TASK) through webapp/work.py, and
`workers.tasks` registers the functions under those names, each with its own time
limits (GAGAR_<KIND>_SOFT_TIME_LIMIT, _TIME_LIMIT: no limit is app-wide). Configured from Django settings
(and so from the environment).

Cluster: CELERY_BROKER_URL=redis://... Embedded default: kombu's filesystem
transport under CELERY_BROKER_DIR (each message and exchange table written whole before
anyone can read it: `AtomicFilesystemTransport`), so one machine still runs a real, separate
worker process with no broker server. Grading rows in the database hold the
state; there is no result backend.

    celery -A workers worker -Q cpu,gpu,derived --concurrency 2
    celery -A workers beat            # the periodic sweep (or: worker -B)
"""

import os
import uuid
from contextlib import contextmanager
from time import monotonic

from celery import Celery
from celery.signals import task_postrun, task_prerun
from django.conf import settings as django_settings
from django.db import close_old_connections
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps

from grading.profiles import QUEUES

CPU, GPU = QUEUES
# Derived data (renders, the search index, the audit, run and grading panel figures) on a queue of its own:
# served by workers of its own, a large batch's figures never hold a process that a grading,
# an export or the evidence pass is waiting for (docs/deployment.md).
DERIVED = "derived"
GRADE_TASK = "workers.tasks.grade"
SWEEP_TASK = "workers.tasks.sweep"
EXPORT_TASK = "workers.tasks.export"  # on the cpu queue
RENDER_TASK = "workers.tasks.render"  # on the derived queue
SEARCH_INDEX_TASK = "workers.tasks.search_index"  # on the derived queue
AUDIT_FIGURES_TASK = "workers.tasks.audit_figures"  # on the derived queue
EVIDENCE_TASK = "workers.tasks.evidence"  # on the cpu queue
BATCH_FIGURES_TASK = "workers.tasks.batch_figures"  # on the derived queue

# Celery's Django fixup closes every database connection before and after each task, whatever
# CONN_MAX_AGE says, unless this is set: then only once every this many tasks, and the handlers
# below apply CONN_MAX_AGE. A new connection per task (PostgreSQL starts a backend, which loads
# its catalogue caches again) cost 9 ms a task where a task of 100 heuristic gradings takes 37.
DB_REUSE_MAX = 1000

app = Celery("gagar", include=["workers.tasks"])


class AtomicFilesystemChannel(filesystem.Channel):
    """kombu's filesystem channel with each message and each exchange's table written whole
    before anyone can read it.

    kombu's own `_put` creates the message file, then locks it, then writes it; a consumer
    that lists the folder in between moves the file away (it never looks at the lock), reads
    it empty and stops the worker with `Unrecoverable error: JSONDecodeError`. Its exchange
    tables (which queues an exchange routes to, read on every publish and requeue) are created
    the same way, and a reader that opens one before the first write reads "" and raises.
    Here both are written under a name nobody reads (a message's has no `.<queue>.msg`
    ending, a table's no `.exchange`), then renamed into place, which a reader sees whole or
    not at all; changes to one exchange's table wait on each other through a lock file."""

    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        _write_whole(os.path.join(self.data_folder_out, name), dumps(payload).encode(), what="message")

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_changing(exchange) as (table, write):
            if binding not in table:
                write([binding, *table])

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        super(filesystem.Channel, self)._delete(queue, exchange, routing_key, pattern, *args, **kwargs)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_changing(exchange) as (table, write):
            if binding in table:
                write([b for b in table if b != binding])

    @contextmanager
    def _table_changing(self, exchange):
        """(the exchange's table as it is, a function that replaces it whole), with every
        other change to that table held off until the block ends."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        try:
            with open(file.with_name(f"{file.name}.lock"), "a") as guard:
                filesystem.lock(guard, filesystem.LOCK_EX)
                yield self.get_table(exchange), lambda table: _write_whole(
                    str(file), dumps(table).encode(), what=f"exchange {exchange!r}'s table")
        except OSError as error:
            raise ChannelError(f"cannot change exchange {exchange!r}'s table in {file.parent}: {error}") from error


def _write_whole(path: str, data: bytes, *, what: str) -> None:
    """`data` into `path` through a temporary name beside it and a rename: readers of `path`
    see the old file or the new one, never part of it."""
    writing = os.path.join(os.path.dirname(path), f"writing-{uuid.uuid4()}")
    try:
        with open(writing, "wb") as f:
            f.write(data)
        os.rename(writing, path)
    except OSError as error:
        if os.path.exists(writing):
            os.remove(writing)
        raise ChannelError(f"cannot write {what} {os.path.basename(path)!r}: {error}") from error


class AtomicFilesystemTransport(filesystem.Transport):
    Channel = AtomicFilesystemChannel


FILESYSTEM_TRANSPORT = f"{__name__}:{AtomicFilesystemTransport.__name__}"


def broker_options(settings) -> dict:
    """Transport options for the configured broker."""
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem:"):
        folder = settings.CELERY_BROKER_DIR
        for sub in ("queue", "processed", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        return {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.1,
        }
    if url.startswith(("redis:", "rediss:")):
        options = {"visibility_timeout": settings.CELERY_VISIBILITY_TIMEOUT}
        # Restore unacknowledged messages of a dead worker every
        # visibility_timeout / 4 at most, not only once an hour.
        options["unacked_restore_interval"] = max(1, min(60, settings.CELERY_VISIBILITY_TIMEOUT // 4))
        options["unacked_restore_throttle"] = 1
        if settings.CELERY_REDIS_KEYPREFIX:
            options["global_keyprefix"] = settings.CELERY_REDIS_KEYPREFIX
        return options
    return {}


def configure(settings) -> None:
    """(Re)apply the configuration from `settings`; tests call it after overriding them."""
    filesystem_broker = settings.CELERY_BROKER_URL.startswith("filesystem:")
    app.conf.update(
        broker_url=settings.CELERY_BROKER_URL,
        broker_transport=FILESYSTEM_TRANSPORT if filesystem_broker else None,
        broker_transport_options=broker_options(settings),
        broker_connection_retry_on_startup=True,
        result_backend=None,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=CPU,
        task_create_missing_queues=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_send_task_events=False,
        beat_schedule={
            "sweep-gradings": {"task": SWEEP_TASK, "schedule": settings.GAGAR_SWEEP_INTERVAL,
                               "options": {"queue": CPU}},
        },
        beat_schedule_filename=str(settings.DATA_DIR / "celerybeat-schedule"),
        timezone="UTC",
        CELERY_DB_REUSE_MAX=DB_REUSE_MAX,
    )


def close_old_connections_around_tasks(**_) -> None:
    """What Django does around each web request, around each task instead: close a connection
    older than CONN_MAX_AGE (so with DB_CONN_MAX_AGE=0, the default, after every task) or one
    an error left unusable, so that a task retried after a lost database connects afresh."""
    close_old_connections()


task_prerun.connect(close_old_connections_around_tasks, weak=False, dispatch_uid="gagar-db-prerun")
task_postrun.connect(close_old_connections_around_tasks, weak=False, dispatch_uid="gagar-db-postrun")


configure(django_settings)
