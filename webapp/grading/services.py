"""Grading jobs: launch, sweep, retry. Workers process them in `worker`.

The Grading rows are the truth; broker messages only carry their primary keys
and may be lost, delayed or delivered twice. A worker claims a row by a
conditional update (queued -> running with a fresh claim token and a lease it
renews while it grades) and writes the result only while that claim holds, so
a duplicate delivery finds nothing to claim and a late finisher whose row was
swept and regraded writes nothing.

The rows are also the outbox: a queued grading whose message the broker has not
taken has no `sent_at`. Messages go out once the transaction that queued them
commits; if the broker is down they stay unsent, and the sweep sends them. The
sweep also re-queues running gradings whose lease ran out (their worker is gone)
and re-sends the messages that were lost (webapp/leases.py: a broker restarted
without persistence, a worker that died holding a message it had not started).

A cancelled run (`grading_run_cancel`) cancels its queued gradings at once: a
worker claims only queued rows, and the sweep sends only queued ones, so their
messages find nothing. Its running gradings finish and keep their result, since
the work is mostly done; but one that would be retried, or whose worker is lost,
is cancelled rather than queued again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from grading.profiles import QUEUES, Profile, ProfileError, load_profiles
from webapp.bulk import insert_rows
from webapp.grading import sql
from webapp.jobs import GPU, GRADE_TASK, app
from webapp.leases import LOST_AFTER_S, idle_queues
from webapp.models import Batch, Grading, GradingRun, Group

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE,
                                            Grading.Status.FAILED, Grading.Status.CANCELLED)
ACTIVE = (QUEUED, RUNNING)
# A launch of at least this many gradings refreshes PostgreSQL's statistics of the table.
ANALYZE_AFTER = 1000
# Gradings marked sent per UPDATE: SQLite takes up to 32766 parameters in a statement.
MARK_CHUNK = 5000


class LaunchError(ValueError):
    """A launch that cannot start: unknown grader, bad configuration."""


class BrokerUnavailable(Exception):
    """The broker did not take the messages: their gradings stay unsent, for the sweep."""


def grader_profile(grader: str, config: dict | None = None, *, queue: str | None = None) -> Profile:
    """What a launch names: a profile (built-in, or from the $GAGAR_GRADERS file), or
    a grader class by `module:Class` path with `config` as its keyword arguments.

    The one place a launch's queue is chosen: `queue` when given (the command line's
    --queue), else the profile's, else, for a `module:Class` grader, GAGAR_GRADER_QUEUES
    or the gpu queue."""
    try:
        profiles = load_profiles()
    except ProfileError as error:
        raise LaunchError(str(error)) from None
    if grader in profiles:
        if config:
            raise LaunchError(f"profile {grader!r} is configured in its file, not at launch")
        profile = profiles[grader]
    else:
        module, _, cls = grader.partition(":")
        if not (module and cls):
            raise LaunchError(f"unknown grader {grader!r} (profiles: {', '.join(sorted(profiles))}, "
                              "or module:Class)")
        profile = Profile(name=grader, grader=grader, options=dict(config or {}),
                          queue=settings.GAGAR_GRADER_QUEUES.get(grader, GPU))
    if queue is None:
        return profile
    if queue not in QUEUES:
        raise LaunchError(f"unknown queue {queue!r} (queues: {', '.join(QUEUES)})")
    return dataclasses.replace(profile, queue=queue)


@dataclass
class Launch:
    run: GradingRun | None  # None: nothing to grade
    queued: int
    skipped: int
    active_run: GradingRun | None = None  # the latest run still grading skipped groups
    # Why the messages are not sent yet (the broker is down; the sweep sends them once it is
    # back), or "": set when the transaction that queued the gradings commits.
    broker_error: str = ""


def grading_launch(*, batch: Batch, grader: str, config: dict | None = None, user=None,
                   regrade: bool = False, queue: str | None = None,
                   groups: Sequence[int] | None = None) -> Launch:
    """Queue a Grading for every mixed group of `batch`, or for those among `groups` (group
    pks: the batch's gold set, say).

    Skips groups that already have a queued or running grading by the same
    grader and configuration, and, unless `regrade`, those it already graded.
    One launch of a batch at a time: the check and the run it creates are taken
    under one lock, so simultaneous launches make one run. Messages go out once
    the transaction commits.
    """
    try:
        json.dumps(config or {})
    except (TypeError, ValueError) as error:
        raise LaunchError(f"grader configuration is not JSON: {error}") from None
    profile = grader_profile(grader, config, queue=queue)
    # The run keeps the whole profile: workers build the grader from it, with no file.
    config = json.loads(json.dumps(asdict(profile)))
    skip = ACTIVE if regrade else (*ACTIVE, DONE)
    with transaction.atomic():
        # A row lock on PostgreSQL (NO KEY: rows that refer to the batch may still be written
        # meanwhile); SQLite ignores it, and its transactions (IMMEDIATE, see settings) hold
        # the one write lock from their start.
        Batch.objects.select_for_update(no_key=True).get(pk=batch.pk)
        same = Grading.objects.filter(run__batch=batch, run__grader=grader, run__config=config)
        busy = set(same.filter(status__in=skip).values_list("group_id", flat=True))
        mixed = Group.objects.filter(batch=batch, label=Group.Label.MIXED)
        if groups is not None:
            mixed = mixed.filter(pk__in=list(groups))
        group_pks = [pk for pk in mixed.order_by("pk").values_list("pk", flat=True) if pk not in busy]
        if not group_pks:
            active = same.filter(status__in=ACTIVE).order_by("-run_id").values_list("run_id", flat=True).first()
            return Launch(run=None, queued=0, skipped=len(busy),
                          active_run=None if active is None else GradingRun.objects.get(pk=active))
        run = GradingRun.objects.create(batch=batch, grader=grader, config=config,
                                        queue=profile.queue, created_by=user)
        template = Grading(run=run, queued_at=timezone.now(), attempt_limit=settings.GAGAR_GRADING_MAX_ATTEMPTS)
        row = {f.attname: getattr(template, f.attname) for f in Grading._meta.concrete_fields if not f.primary_key}
        ids = insert_rows(Grading, [{**row, "group_id": pk} for pk in group_pks])
        if len(ids) >= ANALYZE_AFTER:
            transaction.on_commit(sql.analyze_gradings, robust=True)
        launch = Launch(run=run, queued=len(ids), skipped=len(busy))

        def send():
            launch.broker_error = send_committed([(pk, run.queue) for pk in ids])

        transaction.on_commit(send, robust=True)
    return launch


def enqueue(grading_ids: Sequence[int], queue: str, *, countdown: float | None = None) -> int:
    """Send `grading_ids` to `queue` in tasks of GAGAR_GRADING_CHUNK ids; return how many tasks."""
    chunk = max(1, settings.GAGAR_GRADING_CHUNK)
    tasks = 0
    with app.connection_for_write() as connection:
        producer = connection.Producer()
        for start in range(0, len(grading_ids), chunk):
            app.send_task(GRADE_TASK, kwargs={"grading_ids": list(grading_ids[start:start + chunk])},
                          queue=queue, countdown=countdown, producer=producer)
            tasks += 1
    return tasks


def gradings_send(gradings: Iterable[tuple[int, str]], *, countdown: float | None = None) -> int:
    """Send the messages of `gradings`, (pk, queue) pairs, and mark the queued ones sent;
    return how many. Raises BrokerUnavailable if the broker does not take them: those not
    sent stay unsent, and the sweep sends them."""
    by_queue: dict[str, list[int]] = defaultdict(list)
    for pk, queue in gradings:
        by_queue[queue].append(pk)
    due = timezone.now() + timedelta(seconds=countdown or 0)
    for queue, ids in by_queue.items():
        ids.sort()
        try:
            enqueue(ids, queue, countdown=countdown)
        except BrokerError as error:
            raise BrokerUnavailable(f"the broker is unreachable ({error})") from error
        for start in range(0, len(ids), MARK_CHUNK):
            Grading.objects.filter(pk__in=ids[start:start + MARK_CHUNK], status=QUEUED).update(sent_at=due)
    return sum(len(ids) for ids in by_queue.values())


def send_committed(gradings: Sequence[tuple[int, str]], *, countdown: float | None = None) -> str:
    """`gradings_send` for a transaction.on_commit callback: a broker outage is logged, not
    raised (the gradings are committed and the sweep sends them); return why, or ""."""
    try:
        gradings_send(gradings, countdown=countdown)
    except BrokerUnavailable as error:
        log.warning("%d gradings wait for the sweep to send them: %s", len(gradings), error)
        return str(error)
    return ""


# --- sweep and retry ------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    requeued: int  # their lease ran out (the worker is gone): queued again
    failed: int    # their lease ran out and they had no attempt left
    sent: int      # messages sent: unsent gradings, and those whose message was lost or overdue
    broker_error: str = ""  # why some were not sent (they wait for the next sweep)
    unsent: int = 0  # how many wait to be sent


def gradings_sweep(*, resend_after: float | None = None) -> Sweep:
    """Re-queue running gradings whose lease ran out (fail those out of attempts), then send
    the messages of queued gradings that have none: unsent ones, those whose queue the broker
    lost, and those queued longer than `resend_after` (GAGAR_GRADING_RESEND_AFTER)."""
    resend_after = settings.GAGAR_GRADING_RESEND_AFTER if resend_after is None else resend_after
    now = timezone.now()
    requeued, failed = _requeue_expired(now)
    queued = Grading.objects.filter(status=QUEUED)
    unsent = list(queued.filter(sent_at=None).values_list("pk", "run__queue"))
    overdue = queued.filter(sent_at__lt=now - timedelta(seconds=resend_after))
    late = queued.filter(sent_at__lt=now - timedelta(seconds=LOST_AFTER_S))
    try:
        lost = _idle_queues(set(late.values_list("run__queue", flat=True).distinct()))
        resend = list((overdue | late.filter(run__queue__in=lost)).values_list("pk", "run__queue"))
        sent = gradings_send(unsent + resend)
    except BrokerUnavailable as error:
        waiting = queued.filter(sent_at=None).count()
        log.warning("sweep: %d requeued, %d failed; %d wait to be sent: %s", requeued, failed, waiting, error)
        return Sweep(requeued=requeued, failed=failed, sent=0, broker_error=str(error), unsent=waiting)
    if requeued or failed or sent:
        log.warning("sweep: %d requeued, %d failed, %d sent", requeued, failed, sent)
    return Sweep(requeued=requeued, failed=failed, sent=sent)


def _requeue_expired(now) -> tuple[int, int]:
    """Queue again (unsent) the running gradings whose lease ran out, or fail those with no
    attempt left; return how many of each."""
    requeued = failed = 0
    expired = (Grading.objects.filter(status=RUNNING, lease_expires_at__lt=now)
               .values_list("pk", "claim_token", "attempts", "attempt_limit"))
    for pk, token, attempts, limit in expired:
        mine = Grading.objects.filter(pk=pk, status=RUNNING, claim_token=token)
        if attempts >= limit:
            failed += mine.update(status=FAILED, finished_at=now, lease_expires_at=None,
                                  error=f"gave up after {attempts} attempts: the last one lost its worker")
            continue
        # One statement checks the run's cancel mark and queues: see grading_run_cancel.
        again = mine.filter(run__cancelled_at=None).update(
            status=QUEUED, claim_token="", queued_at=now, sent_at=None, lease_expires_at=None,
            error=f"attempt {attempts} lost its worker; queued again by the sweep")
        requeued += again
        if not again:
            mine.update(status=CANCELLED, finished_at=now, lease_expires_at=None,
                        error="its run was cancelled and its worker was lost")
    return requeued, failed


def _idle_queues(queues: set[str]) -> set[str]:
    """`idle_queues`, with BrokerUnavailable when the broker is unreachable."""
    try:
        return idle_queues(queues)
    except BrokerError as error:
        raise BrokerUnavailable(f"the broker is unreachable ({error})") from error


def grading_run_cancel(*, run: GradingRun, user) -> int:
    """Cancel `run`: its queued gradings become cancelled, its running ones finish but are
    neither retried nor queued again. Return how many gradings were cancelled now; a run
    already cancelled keeps who cancelled it first."""
    now = timezone.now()
    with transaction.atomic():
        # Marked first: a worker that puts a grading back in the queue checks the mark in
        # the same statement, and a grading it put back before sees the update below.
        GradingRun.objects.filter(pk=run.pk, cancelled_at=None).update(cancelled_at=now, cancelled_by=user)
        run.refresh_from_db(fields=["cancelled_at", "cancelled_by"])
        return Grading.objects.filter(run=run, status=QUEUED).update(
            status=CANCELLED, finished_at=now, claim_token="", error=f"cancelled by {user.get_username()}")


def gradings_retry_failed(*, batch: Batch) -> Launch:
    """Queue the failed gradings of `batch` again, with a fresh set of attempts."""
    with transaction.atomic():
        rows = list(Grading.objects.select_for_update().filter(run__batch=batch, status=FAILED)
                    .values_list("pk", "run__queue"))
        now = timezone.now()
        Grading.objects.filter(pk__in=[pk for pk, _ in rows], status=FAILED).update(
            status=QUEUED, error="", claim_token="", queued_at=now, sent_at=None, finished_at=None,
            attempt_limit=F("attempts") + settings.GAGAR_GRADING_MAX_ATTEMPTS,
        )
        retry = Launch(run=None, queued=len(rows), skipped=0)

        def send():
            retry.broker_error = send_committed(rows)

        transaction.on_commit(send, robust=True)
    return retry
