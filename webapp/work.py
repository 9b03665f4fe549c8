"""Background work, one way for every kind: sending tasks, claimed work, and stale derived data.

Workers run tasks that the web app sends by name (`webapp.jobs`); messages carry primary keys
only and may be lost, delayed or delivered twice, so the database holds the state. Three
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

- **Derived data** (a `Derived` kind: the render store, the search index, the audit
  dashboard's figures, a batch's figures for its run page and for its grading panel). Each is
  declared once, below, since other features' writes make it stale, and computed by its own
  feature. One protocol:

      a write ─commits─▶ mark_stale ─▶ mark_requested: its rows requested now ─▶ send_derived
      a page (a part missing) ───────▶ mark_requested     (only if none was requested already)
      the worker: recompute ─▶ recomputed: the requests made before it read the data cleared;
                                           one made since ─▶ send_derived after repeat_after_s
      the sweep: sweep_derived ─▶ due rows none of whose `quiet` fields moved for `lost_after`
                                  ─▶ send_derived again

  Many writes while a recompute is pending send one message. The render store marks nothing
  (a lost render is made on the first visit of its group), and the search index's rows are
  due while they count fewer trajectories than their batch. The tasks are idempotent and go to
  a queue of their own (`DERIVED`), so that their workers never hold a process that gradings,
  exports or the evidence pass wait for.

Per-kind settings, each read from GAGAR_<KIND>_<NAME> (`setting`): LEASE, HEARTBEAT,
MAX_ATTEMPTS, RESEND_AFTER for claimed kinds, SOFT_TIME_LIMIT and TIME_LIMIT for every task
(`time_limits`), so that an export's limits never govern a grading or a render.

This module addresses tasks only by name and touches only shared models: features call it,
it calls no feature.
"""

from __future__ import annotations

import logging
import threading
import traceback
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

from webapp.jobs import (
    AUDIT_FIGURES_TASK,
    CPU,
    DERIVED,
    GRADING_PANEL_TASK,
    RENDER_TASK,
    RUN_FIGURES_TASK,
    SEARCH_INDEX_TASK,
    app,
)
from webapp.models import AuditFigures, BatchFigures, GradingPanel, SearchState

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


def send_after_commit(send_now: Callable[[], None], *, waiting: str, derived: bool = False) -> Sending:
    """Run `send_now` once the transaction in progress commits (at once outside one); `derived`
    data's as `on_commit_derived` says. A broker that refuses is logged, saying what is
    `waiting` and for what, and kept in the answer; never raised: the rows are committed, and
    their sweep or first use makes up for it."""
    sending = Sending()

    def after_commit():
        try:
            send_now()
        except BrokerUnavailable as error:
            log.warning("%s: %s", waiting, error)
            sending.broker_error = str(error)

    if derived:
        on_commit_derived(after_commit)
    else:
        transaction.on_commit(after_commit, robust=True)
    return sending


_held = threading.local()


@contextmanager
def derived_data_last() -> Iterator[None]:
    """Within, derived data's hooks (`on_commit_derived`) are held, and registered when the
    block ends: they run after every other hook of the transaction, the block's included.
    For an online step: its import asks for renders, the index and figures before its launch
    asks for gradings, and a free process of a worker that serves both queues takes the first
    message sent, while the trainer waits for the gradings. Use it inside the transaction's
    `atomic` block, so that it ends first."""
    if getattr(_held, "hooks", None) is not None:  # nested: the outer block registers them
        yield
        return
    _held.hooks = []
    try:
        yield
        for hook in _held.hooks:
            transaction.on_commit(hook, robust=True)
    finally:
        _held.hooks = None


def on_commit_derived(hook: Callable[[], None]) -> None:
    """Register `hook`, which sends a derived data's recompute, to run on commit; inside
    `derived_data_last`, when that block ends."""
    hooks = getattr(_held, "hooks", None)
    if hooks is None:
        transaction.on_commit(hook, robust=True)
    else:
        hooks.append(hook)


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
    held = waiting(work, pks)
    return work.model.objects.filter(pk__in=[pk for pk in pks if pk not in held], status=QUEUED).update(
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


# --- derived data -------------------------------------------------------------------------

@dataclass(frozen=True)
class Derived:
    """A kind of derived data: a cache that writes make stale and a worker recomputes, on the
    DERIVED queue. Its store (`model`) holds a row per part that a message recomputes, with
    `sent_at` (when the last message of its key went out) and, where requests are marked,
    `requested_at` (since when a recompute is due; null once done). Declared below, one
    constant per kind, because other features' writes make it stale; its feature computes it."""

    kind: str  # its settings' prefix (GAGAR_<KIND>_SOFT_TIME_LIMIT...) and its name in the logs
    task: str
    waiting: str  # what waits, said in the log, when the broker refuses its message
    model: type[Model] | None = None  # None: nothing stored to mark or sweep, a lost message costs a first view
    key: str | None = "batch_id"  # the store's field a message carries; None: one message, no arguments,
    # recomputes every due row
    due: Q = Q(requested_at__isnull=False)  # the rows whose recompute is due
    quiet: tuple[str, ...] = ("requested_at", "sent_at")  # a due row none of these moved for `lost_after` is lost
    lost_after: timedelta = timedelta(minutes=1)
    repeat_after_s: float = 2  # a part requested again while it was computed is computed again this long after
    sweep_sends: int | None = None  # messages a sweep sends at most (the next sends the rest); None: all


# The render store (webapp.html.renders): a lost render is made when its group is first shown.
RENDERS = Derived(kind="render", task=RENDER_TASK, waiting="patches render on first view")
# The search index (webapp.search.services): a batch is due while its state counts fewer
# trajectories indexed than it holds; its worker's progress (`indexed_at`) keeps it from the sweep.
SEARCH_INDEX = Derived(kind="search", task=SEARCH_INDEX_TASK, model=SearchState,
                       due=Q(n_indexed__lt=F("batch__n_trajectories")), quiet=("sent_at", "indexed_at"),
                       lost_after=timedelta(minutes=5),
                       waiting="not indexed for search yet, the search sweep sends it later")
# The audit dashboard's parts (webapp.audit.figures, .refresh): one message recomputes every
# requested part; a part requested again by its sweep has its message sent again.
AUDIT_FIGURES = Derived(kind="audit_figures", task=AUDIT_FIGURES_TASK, model=AuditFigures, key=None,
                        quiet=("requested_at",), repeat_after_s=5,
                        waiting="recompute not queued, the sweep sends it again")
# A batch's figures: its run page's (webapp.runs.figures) and its grading panel's
# (webapp.grading.figures), each stored by `recompute`.
RUN_FIGURES = Derived(kind="run_figures", task=RUN_FIGURES_TASK, model=BatchFigures, sweep_sends=200,
                      waiting="recompute not queued, the sweep sends it again")
GRADING_PANEL = Derived(kind="grading_panel", task=GRADING_PANEL_TASK, model=GradingPanel, sweep_sends=200,
                        waiting="recompute not queued, the sweep sends it again")
DERIVED_KINDS = (RENDERS, SEARCH_INDEX, AUDIT_FIGURES, RUN_FIGURES, GRADING_PANEL)
# How much of a failed recompute's reason its row keeps.
FAILURE_CHARS = 2000


class DataChanged(Exception):
    """The data changed while a recompute read it: nothing is stored, and it runs again."""


def _rows_of(work: Derived, key) -> QuerySet:
    """The store's rows a message of `key` recomputes (every row, for a kind of one message)."""
    rows = work.model.objects.all()
    return rows if work.key is None else rows.filter(**{work.key: key})


def send_derived(work: Derived, key=None, *, countdown: float | None = None) -> bool:
    """Send the recompute of `key` (a kind of one message: no key) and record when; False when
    the broker refused (logged, saying what waits: the kind's sweep or first use makes up for it)."""
    try:
        send(work.task, [{} if work.key is None else {work.key: key}], queue=DERIVED, countdown=countdown)
    except BrokerUnavailable as error:
        log.warning("%s%s: %s: %s", work.kind, "" if work.key is None else f" {work.key}={key}", work.waiting, error)
        return False
    if work.model is not None and work.key is not None:
        _rows_of(work, key).update(sent_at=timezone.now())
    return True


def send_derived_after_commit(work: Derived, key=None) -> None:
    """`send_derived` once the transaction in progress commits, after its other messages
    (`on_commit_derived`)."""
    on_commit_derived(lambda: send_derived(work, key))


def mark_requested(work: Derived, rows: QuerySet, *, key=None, new: Sequence[Model] = (), again: bool = False
                   ) -> bool:
    """Mark `rows` of the store (all of `key`'s, for a kind with keys) requested now, `new` rows
    created first (those there already are left as they are), and once the transaction in
    progress commits send the recompute, only if one of them was not requested already: many
    requests while one is pending send one message. `again`: those requested already are
    requested now, so that a recompute already queued or running, which may have read the data
    before the write that asks, runs again (`recomputed`). True if a message is to go."""
    now = timezone.now()
    with transaction.atomic():
        if new:
            work.model.objects.bulk_create(new, ignore_conflicts=True)
        newly = rows.filter(requested_at=None).update(requested_at=now)
        if again:
            rows.filter(requested_at__lt=now).update(requested_at=now)
    if newly:
        send_derived_after_commit(work, key)
    return bool(newly)


def mark_stale(work: Derived, rows: QuerySet, *, key=None, new: Sequence[Model] = ()) -> None:
    """After a write that changes what `rows` are computed from: once it commits, request them
    again (`mark_requested`, `again`), outside its transaction, whose locks it need not hold."""
    on_commit_derived(lambda: mark_requested(work, rows, key=key, new=new, again=True))


def recomputed(work: Derived, started: datetime, key=None, **fields) -> bool:
    """After a recompute of `key`'s rows that read its data from `started` on: clear their
    requests made until then (setting `fields` on them too); if one of them is requested still,
    by a write since, send the recompute again after `repeat_after_s`. True then."""
    rows = _rows_of(work, key)
    rows.filter(requested_at__lte=started).update(requested_at=None, **fields)
    again = rows.filter(work.due).exists()
    if again:
        send_derived(work, key, countdown=work.repeat_after_s)
    return again


def recompute(work: Derived, key, compute: Callable[[], dict | None]) -> None:
    """In a worker: store `key`'s row as `compute()` gives its fields (None: nothing to store, its
    subject is gone), unless it was computed since it was last requested (a message sent
    twice), and clear the requests it answers (`recomputed`). A compute that raises DataChanged
    runs again after `repeat_after_s`; one that fails records why in the row's `error`, which
    keeps its previous figures. For a store of one row per key with `computed_at` and `error`."""
    started = timezone.now()
    asked = _rows_of(work, key).values_list("requested_at", "computed_at").first()
    if asked is not None and asked[0] is None and asked[1] is not None:
        return
    try:
        fields = compute()
    except DataChanged:
        send_derived(work, key, countdown=work.repeat_after_s)
        return
    except Exception as error:  # one key's failure must not hide the others' figures
        log.exception("%s %s=%s failed", work.kind, work.key, key)
        recomputed(work, started, key, error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"
                   [:FAILURE_CHARS])
        return
    if fields is None:
        return
    work.model.objects.update_or_create(**{work.key: key}, defaults={**fields, "computed_at": timezone.now(),
                                                                     "error": ""})
    recomputed(work, started, key)


def sweep_derived(work: Derived) -> int:
    """Send again the recomputes whose message is lost: due rows none of whose `quiet` fields
    moved for `lost_after` (the broker refused or lost the message, or its worker died). A kind
    with keys sends each key's message, oldest first, up to `sweep_sends`, and stops at the
    first the broker refuses (the next sweep tries again); a kind of one message requests its
    lost rows again and sends it. How many rows were sent again."""
    if work.model is None:
        return 0
    now = timezone.now()
    lost = work.model.objects.filter(work.due)
    for name in work.quiet:
        lost = lost.filter(Q(**{name: None}) | Q(**{f"{name}__lt": now - work.lost_after}))
    if work.key is None:
        sent = lost.update(requested_at=now)
        if sent:
            send_derived(work)
    else:
        sent = 0
        for key in list(lost.order_by(work.quiet[0], work.key).values_list(work.key, flat=True)[:work.sweep_sends]):
            if not send_derived(work, key):
                break
            sent += 1
    if sent:
        log.warning("%s sweep: %d lost recomputes sent again", work.kind, sent)
    return sent


def renders_stale(batch_id: int) -> None:
    """After an import: once it commits, have a worker render the batch's patches."""
    send_derived_after_commit(RENDERS, batch_id)


def search_stale(batch_id: int) -> None:
    """After an import, in its transaction: give the batch its index state (nothing indexed yet,
    the first import), and once it commits, have a worker index the new rows."""
    SearchState.objects.get_or_create(batch_id=batch_id)
    send_derived_after_commit(SEARCH_INDEX, batch_id)


def figures_stale(batch_id: int, kinds: tuple[str, ...], version: str | None = None) -> None:
    """After a write that changes the data of the audit dashboard's parts of these `kinds` over
    `batch_id` (and so over every batch), of `version` (None: of every version): once it
    commits, request those that were ever computed (the others are computed when first shown):
    a grading run of 10,000 groups sends one message while the recompute is pending."""
    rows = AuditFigures.objects.filter(Q(batch_id=batch_id) | Q(batch=None), kind__in=kinds)
    if version is not None:
        rows = rows.filter(version__in=(version, ""))
    mark_stale(AUDIT_FIGURES, rows)


def batch_figures_stale(batch_id: int) -> None:
    """After a write that changes what a batch's figures are computed from (an import, a
    grading, a human ranking, its advantage config): once it commits, request its run page's
    and its grading panel's (the pages show the previous ones as updating): grading a step's
    groups sends one message of each while its recompute is pending."""
    for work in (RUN_FIGURES, GRADING_PANEL):
        mark_stale(work, work.model.objects.filter(batch_id=batch_id), key=batch_id,
                   new=[work.model(batch_id=batch_id)])
