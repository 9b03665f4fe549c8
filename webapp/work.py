"""Background work, one way for every kind: sending tasks and claimed work (derived data, the
caches that writes make stale, is webapp/derived.py, on top of this).

Workers run tasks that the web app sends by name (`webapp.jobs`); messages carry primary keys
only and may be lost, delayed or delivered twice, so the database holds the state. Two
patterns, each written once here:

- **Sending** (`send`, `send_after_commit`). A message goes out once the transaction that made
  its rows commits. When the broker refuses it, the refusal is logged and never raised to the
  user: what waits is sent again by the sweep (or, for a cache, made up for on first use).

- **Claimed work** (a `Claimed` kind: gradings and exports, each defined by its feature). The
  rows are the outbox: a queued row has no `sent_at` until its message went out. A worker
  claims a row by one conditional UPDATE (queued -> running, a fresh claim token, attempts + 1,
  a lease) and writes its result only while that claim holds, so a second delivery claims
  nothing. While it works, a thread of its process renews the lease (`lease_renewed`); a
  killed worker stops renewing. The sweep
  (`sweep`) queues again the rows whose lease ran out, or fails those out of attempts, and sends
  the messages of queued rows that have none: unsent (the broker was down), forgotten (a Redis
  that restarted or was flushed since the kind's last sweep: every queued row's, however full
  its queues are again), lost otherwise (taken by a worker that died before claiming: their
  queue holds no message LOST_AFTER_S after they were due), or overdue. A row may wait for
  other work (`waits`: a grading for its group's execution evidence): while it does it is not
  due, so nothing sends it (`send_claimed`), claims it (`claim`) or sweeps it; the work it waits
  for sends it as that ends, and should that message be lost, the sweep sends it once it waits
  no more, as any other unsent row. An attempt that ends without a result, whatever ended it
  (its worker lost, its time up, an error worth another try), ends by `attempt_lost`: queued
  again, failed out of attempts, or cancelled with its work.

Per-kind settings, each read from GAGAR_<KIND>_<NAME> (`setting`): LEASE, HEARTBEAT,
MAX_ATTEMPTS, RESEND_AFTER for claimed kinds, SOFT_TIME_LIMIT and TIME_LIMIT for every task
(`time_limits`), so that an export's limits never govern a grading or a render.

This module addresses tasks only by name and touches only shared models: features call it,
it calls no feature.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Model, Q, QuerySet
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from webapp.jobs import CPU, app

log = logging.getLogger(__name__)

# A queued row whose message was due this long ago, on a queue the broker holds no message of,
# has lost its message. Not sooner: a live worker may have just taken it and be about to claim
# the row. A message sent twice costs only its delivery: the second copy claims nothing.
LOST_AFTER_S = 30
# The Redis hash of each claimed kind's mark for each Redis process its sweep has seen (field
# "<kind>:<run_id>"): a process without the mark may have lost messages sent before it started.
# kombu's client puts CELERY_REDIS_KEYPREFIX before it, as before the queues' keys, so
# deployments that share a Redis keep their own marks.
SWEPT_MARKS = "gagar:swept"
# Rows marked sent per UPDATE: SQLite takes up to 32766 parameters in a statement.
MARK_CHUNK = 5000
QUEUED, RUNNING, FAILED, CANCELLED = "queued", "running", "failed", "cancelled"


class BrokerUnavailable(Exception):
    """The broker did not take the messages: what they carry waits for the sweep."""


def setting(kind: str, name: str):
    """The deployment's GAGAR_<KIND>_<NAME> (kind "grading", name "LEASE": GAGAR_GRADING_LEASE)."""
    return getattr(settings, f"GAGAR_{kind.upper()}_{name}")


def time_limits(kind: str) -> dict:
    """A task's own soft and hard time limits, for its decorator."""
    return {"soft_time_limit": setting(kind, "SOFT_TIME_LIMIT"), "time_limit": setting(kind, "TIME_LIMIT")}


# --- sending ------------------------------------------------------------------------------

def send(task: str, messages: Sequence[dict], *, queue: str, countdown: float | None = None) -> None:
    """Send one message of `task` per kwargs in `messages` to `queue`, over
    one connection made from the app's configuration as it is now; BrokerUnavailable if the
    broker refuses."""
    try:
        with app.connection_for_write() as broker:
            producer = broker.Producer()
            for kwargs in messages:
                app.send_task(task, kwargs=kwargs, queue=queue, countdown=countdown, producer=producer)
    except BrokerError as error:
        raise BrokerUnavailable(f"the broker is unreachable ({error})") from error


@dataclass
class Sending:
    """What `send_after_commit` did once the transaction committed: "" or why nothing went out."""

    broker_error: str = ""


def send_after_commit(send_now: Callable[[], None], *, waiting: str) -> Sending:
    """Run `send_now` once the transaction in progress commits (at once outside one). A broker
    that refuses is logged, saying what is
    `waiting` and for what, and kept in the answer; never raised: the rows are committed, and
    their sweep or first use makes up for it."""
    sending = Sending()

    def after_commit():
        try:
            send_now()
        except BrokerUnavailable as error:
            log.warning("%s: %s", waiting, error)
            sending.broker_error = str(error)

    transaction.on_commit(after_commit, robust=True)
    return sending


# --- claimed work -------------------------------------------------------------------------

@dataclass(frozen=True)
class Claimed:
    """A kind of claimed work: its rows, its task, how its messages carry primary keys, and
    which queue a row's message goes to."""

    kind: str  # its settings' prefix: GAGAR_<KIND>_...
    model: type[Model]
    task: str
    messages: Callable[[list[int]], list[dict]]
    queue_lookup: str | None = None  # a lookup naming each row's queue; None: every row on the cpu queue
    # Rows matching this are not queued again once their worker is lost, but cancelled, saying why.
    cancelled: Q | None = None
    cancelled_why: str = ""
    # Called with (pk, claim token) of each row whose worker was lost: what that worker left.
    on_lost: Callable[[int, str], None] | None = None
    limit_field: str | None = None  # a per-row attempt limit; None: MAX_ATTEMPTS
    reset: dict = field(default_factory=dict)  # fields a row queued again starts from
    # Rows matching this wait for other work, which sends them as it ends: not due meanwhile.
    waits: Q | None = None


def chunked_ids(name: str, kind: str) -> Callable[[list[int]], list[dict]]:
    """Messages that carry CHUNK primary keys each, as the list `name`."""
    def messages(pks: list[int]) -> list[dict]:
        size = max(1, setting(kind, "CHUNK"))
        return [{name: pks[i:i + size]} for i in range(0, len(pks), size)]
    return messages


def lease_expiry(work: Claimed, now: datetime | None = None) -> datetime:
    """When a lease of `work` taken or renewed now runs out."""
    return (now or timezone.now()) + timedelta(seconds=setting(work.kind, "LEASE"))


def waiting(work: Claimed, pks: Sequence[int]) -> set[int]:
    """Those of `pks` that wait for other work (`Claimed.waits`)."""
    if work.waits is None:
        return set()
    pks = list(pks)
    return {pk for start in range(0, len(pks), MARK_CHUNK)
            for pk in work.model.objects.filter(work.waits, pk__in=pks[start:start + MARK_CHUNK])
            .values_list("pk", flat=True)}


def due(work: Claimed, rows: QuerySet) -> QuerySet:
    """Those of `rows` that wait for nothing."""
    return rows if work.waits is None else rows.exclude(work.waits)


def claim(work: Claimed, pks: Sequence[int], token: str, now: datetime, **fields) -> int:
    """Claim the queued ones among `pks` that wait for nothing under `token` (with `fields` set
    too); how many. Those that wait stay queued: what they wait for sends them once it ends."""
    return due(work, work.model.objects.filter(pk__in=list(pks), status=QUEUED)).update(
        status=RUNNING, claim_token=token, claimed_at=now, lease_expires_at=lease_expiry(work, now),
        attempts=F("attempts") + 1, **fields)


def new_token() -> str:
    return uuid.uuid4().hex


@contextmanager
def lease_renewed(work: Claimed, claimed: Callable[[], QuerySet], name: str) -> Iterator[None]:
    """Renew the lease of the rows `claimed()` selects (those still held under this claim) every
    HEARTBEAT seconds from a thread of this process while the block runs. `name` names the thread."""
    stop = threading.Event()

    def renew():
        try:
            while not stop.wait(setting(work.kind, "HEARTBEAT")):
                try:
                    claimed().update(lease_expires_at=lease_expiry(work))
                except DatabaseError as error:  # weather: the next beat tries again, on a new connection
                    log.warning("lease renewal failed: %s", error)
                    connection.close()
        finally:
            connection.close()  # this thread's own

    heart = threading.Thread(target=renew, name=name, daemon=True)
    heart.start()
    try:
        yield
    finally:
        stop.set()
        heart.join()


def enqueue(work: Claimed, pks: list[int], queue: str, *, countdown: float | None = None) -> int:
    """Send the messages of `pks` to `queue`; how many messages. BrokerUnavailable if refused."""
    messages = work.messages(pks)
    send(work.task, messages, queue=queue, countdown=countdown)
    return len(messages)


def send_claimed(work: Claimed, rows: Iterable[tuple[int, str]], *, countdown: float | None = None) -> int:
    """Send the messages of `rows`, (pk, queue) pairs, but of those that wait (`Claimed.waits`,
    read now: what they wait for sends them as it ends), and mark the queued ones sent; how
    many. BrokerUnavailable if the broker refuses: those not sent stay unsent, for the sweep."""
    rows = list(rows)
    held = waiting(work, [pk for pk, _ in rows])
    by_queue: dict[str, list[int]] = defaultdict(list)
    for pk, queue in rows:
        if pk not in held:
            by_queue[queue].append(pk)
    sent_at = timezone.now() + timedelta(seconds=countdown or 0)
    for queue, pks in by_queue.items():
        pks.sort()
        enqueue(work, pks, queue, countdown=countdown)
        for start in range(0, len(pks), MARK_CHUNK):
            work.model.objects.filter(pk__in=pks[start:start + MARK_CHUNK], status=QUEUED).update(sent_at=sent_at)
    return sum(len(pks) for pks in by_queue.values())


def send_claimed_after_commit(work: Claimed, rows: Sequence[tuple[int, str]], *,
                              countdown: float | None = None) -> Sending:
    """`send_claimed` once the transaction commits; a refusal leaves them for the sweep."""
    return send_after_commit(lambda: send_claimed(work, rows, countdown=countdown),
                             waiting=f"{len(rows)} {work.kind}s wait for the sweep to send them")


def queued_rows(work: Claimed, found: QuerySet) -> list[tuple[int, str]]:
    """(pk, queue) of the rows `found` selects."""
    if work.queue_lookup is None:
        return [(pk, CPU) for pk in found.values_list("pk", flat=True)]
    return list(found.values_list("pk", work.queue_lookup))


def attempt_lost(work: Claimed, pk: int, token: str, why: str, now: datetime, *,
                 spent: dict | None = None) -> str:
    """End the attempt of the row claimed under `token`, which ended without a result (`why`:
    "lost its worker", "failed: <the error>"): fail it once it made its attempts, with the
    fields of what the attempt `spent` (a grading's usage), cancel it if its work was cancelled,
    else queue it again, unsent (the caller or the sweep sends it). Its new status; "" if the
    claim had moved on."""
    mine = work.model.objects.filter(pk=pk, status=RUNNING, claim_token=token)
    attempts, limit = mine.values_list("attempts", work.limit_field or "attempts").first() or (None, None)
    if attempts is None:
        return ""
    limit = limit if work.limit_field else setting(work.kind, "MAX_ATTEMPTS")
    ended = {"finished_at": now, "lease_expires_at": None}
    if attempts >= limit:
        done = mine.update(status=FAILED, error=f"gave up after {attempts} attempts: the last one {why}", **ended,
                           **(spent or {}))
        return FAILED if done else ""
    if work.cancelled is not None and mine.filter(work.cancelled).update(
            status=CANCELLED, error=f"{work.cancelled_why} and its attempt {attempts} {why}", **ended):
        return CANCELLED
    # One statement checks the cancel mark and queues: a cancel marks first, then cancels queued rows.
    keep = mine if work.cancelled is None else mine.exclude(work.cancelled)
    queued = keep.update(status=QUEUED, claim_token="", queued_at=now, sent_at=None, lease_expires_at=None,
                         error=f"attempt {attempts} {why}; queued again", **work.reset)
    return QUEUED if queued else ""


@dataclass(frozen=True)
class Sweep:
    requeued: int  # their lease ran out (the worker is gone): queued again
    failed: int    # their lease ran out and they had no attempt left
    sent: int      # messages sent: unsent rows, and those whose message was lost or overdue
    broker_error: str = ""  # why some were not sent (they wait for the next sweep)
    unsent: int = 0  # how many wait to be sent


def sweep(work: Claimed, *, resend_after: float | None = None) -> Sweep:
    """Queue again the running rows whose lease ran out (fail those out of attempts), then send
    the messages of queued rows that wait for nothing and have none: unsent ones; every one
    sent to a Redis broker that has forgotten them since this kind's last sweep
    (`broker_forgot`); otherwise those whose queue the broker lost, and those sent longer than
    `resend_after` ago (RESEND_AFTER)."""
    resend_after = setting(work.kind, "RESEND_AFTER") if resend_after is None else resend_after
    now = timezone.now()
    outcomes = defaultdict(int)
    expired = work.model.objects.filter(status=RUNNING, lease_expires_at__lt=now)
    for pk, token in expired.values_list("pk", "claim_token"):
        outcomes[attempt_lost(work, pk, token, "lost its worker", now)] += 1
        if work.on_lost is not None:
            work.on_lost(pk, token)
    requeued, failed = outcomes[QUEUED], outcomes[FAILED]
    queued = due(work, work.model.objects.filter(status=QUEUED))
    unsent = queued_rows(work, queued.filter(sent_at=None))
    try:
        forgot = broker_forgot(work.kind)
        if forgot:
            # Sent before the restart or flush, their messages are gone, wherever their queue
            # stands now; those sent since then go twice, and the second copy claims nothing.
            resend = queued_rows(work, queued.exclude(sent_at=None))
        else:
            overdue = queued.filter(sent_at__lt=now - timedelta(seconds=resend_after))
            late = queued_rows(work, queued.filter(sent_at__lt=now - timedelta(seconds=LOST_AFTER_S)))
            lost = idle_queues({queue for _, queue in late})
            resend = queued_rows(work, overdue) + [row for row in late if row[1] in lost]
        sent = send_claimed(work, sorted(set(unsent + resend)))
        if forgot:
            broker_swept(forgot)
    except BrokerUnavailable as error:
        unsent_left = queued.filter(sent_at=None).count()
        log.warning("%s sweep: %d requeued, %d failed; %d wait to be sent: %s", work.kind, requeued, failed,
                    unsent_left, error)
        return Sweep(requeued=requeued, failed=failed, sent=0, broker_error=str(error), unsent=unsent_left)
    if forgot and resend:
        log.warning("%s sweep: the broker forgot its messages (a Redis restarted or flushed since the last "
                    "sweep): %d queued rows sent again", work.kind, len(resend))
    if requeued or failed or sent:
        log.warning("%s sweep: %d requeued, %d failed, %d sent", work.kind, requeued, failed, sent)
    return Sweep(requeued=requeued, failed=failed, sent=sent)


@contextmanager
def broker_connection():
    """A connection to the broker, made from the app's configuration as it is now;
    BrokerUnavailable if it is unreachable."""
    try:
        with app.connection_for_write() as broker:
            yield broker
    except BrokerError as error:
        raise BrokerUnavailable(f"the broker is unreachable ({error})") from error


def idle_queues(queues: set[str]) -> set[str]:
    """Those of `queues` that hold no message on the broker; BrokerUnavailable if unreachable."""
    if not queues:
        return set()
    with broker_connection() as broker:
        channel = broker.default_channel
        return {queue for queue in queues if not channel.queue_declare(queue=queue).message_count}


def broker_forgot(kind: str) -> str:
    """`kind`'s mark for the Redis process that is the broker now, when that process holds none:
    since `kind`'s last sweep (`broker_swept`) Redis restarted (without persistence, or from a
    snapshot older than some messages) or was flushed, or it was never swept. "" when the mark
    is there, and for the filesystem broker, whose messages are files that outlive its workers.
    BrokerUnavailable if the broker is unreachable."""
    with broker_connection() as broker:
        if broker.transport.driver_type == "filesystem":
            return ""
        client = broker.default_channel.client
        # run_id is new at each start of a Redis process, whatever it restored from disk.
        mark = f"{kind}:{client.info('server')['run_id']}"
        return "" if client.hget(SWEPT_MARKS, mark) else mark


def broker_swept(mark: str) -> None:
    """Leave `mark` (from `broker_forgot`) once its kind's messages were sent again."""
    with broker_connection() as broker:
        broker.default_channel.client.hset(SWEPT_MARKS, mark, timezone.now().isoformat())
