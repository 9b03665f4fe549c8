"""Derived data, one way for every kind: caches that writes make stale and workers recompute.

A kind (`Derived`: the render store, the search index, the audit dashboard's figures, a
batch's figures for its run page and for its grading panel) is declared once, below, since
other features' writes make it stale, and computed by its own feature. One protocol:

    a write ─commits─▶ mark_stale ─▶ mark_requested: its rows requested now ─▶ send_derived
    a page (a part missing) ───────▶ mark_requested     (only if none was requested already)
    the worker: recompute_pass ─▶ recomputed: the requests made before it read the data cleared;
                                              one made since ─▶ send_derived after repeat_after_s
    the sweep: sweep_derived ─▶ due rows none of whose `quiet` fields moved for `lost_after`
                                ─▶ send_derived again

Many writes while a recompute is pending send one message. Kinds computed from the same data
share one task (a batch's run page figures and grading panel: its advantages): their message
recomputes each one requested, in one pass over that data, each part reduced by its own
feature (`recompute_pass`, `Part`). The render store marks nothing (a
lost render is made on the first visit of its group), and the search index's rows are due
while they count fewer trajectories than their batch. The tasks are idempotent and go to a
queue of their own (`DERIVED`), so that their workers never hold a process that gradings,
exports or the evidence pass wait for. Messages go out as webapp/work.py sends every task.

This module addresses tasks only by name and touches only shared models: features call it,
it calls no feature.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import transaction
from django.db.models import Case, DateTimeField, F, Model, Q, QuerySet, Value, When
from django.utils import timezone

from webapp.jobs import AUDIT_FIGURES_TASK, BATCH_FIGURES_TASK, DERIVED, RENDER_TASK, SEARCH_INDEX_TASK
from webapp.models import AuditFigures, BatchFigures, GradingPanel, SearchState
from webapp.work import BrokerUnavailable, send

log = logging.getLogger(__name__)


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
# (webapp.grading.figures), each its own feature's store, computed by one task in one pass over
# the batch's advantages (`recompute_pass`, webapp.advantages.services.batch_figures_refresh).
RUN_FIGURES = Derived(kind="run_figures", task=BATCH_FIGURES_TASK, model=BatchFigures, sweep_sends=200,
                      waiting="recompute not queued, the sweep sends it again")
GRADING_PANEL = Derived(kind="grading_panel", task=BATCH_FIGURES_TASK, model=GradingPanel, sweep_sends=200,
                        waiting="recompute not queued, the sweep sends it again")
BATCH_FIGURES = (RUN_FIGURES, GRADING_PANEL)
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
    """Send the recompute of `key` (a kind of one message: no key) and record when, for every
    kind its task recomputes; False when the broker refused (logged, saying what waits: the
    kind's sweep or first use makes up for it)."""
    try:
        send(work.task, [{} if work.key is None else {work.key: key}], queue=DERIVED, countdown=countdown)
    except BrokerUnavailable as error:
        log.warning("%s%s: %s: %s", work.kind, "" if work.key is None else f" {work.key}={key}", work.waiting, error)
        return False
    now = timezone.now()
    for kind in DERIVED_KINDS:
        if kind.task == work.task and kind.model is not None and kind.key is not None:
            _rows_of(kind, key).update(sent_at=now)
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
    newly = _requested(work, rows, new=new, again=again)
    if newly:
        send_derived_after_commit(work, key)
    return newly


def _requested(work: Derived, rows: QuerySet, *, new: Sequence[Model], again: bool) -> bool:
    """`mark_requested`'s marks, without its message: True if one of `rows` was not requested."""
    now = timezone.now()
    with transaction.atomic():
        if new:
            work.model.objects.bulk_create(new, ignore_conflicts=True)
        newly = rows.filter(requested_at=None).update(requested_at=now)
        if again:
            rows.filter(requested_at__lt=now).update(requested_at=now)
    return bool(newly)


def mark_stale(work: Derived, rows: QuerySet, *, key=None, new: Sequence[Model] = ()) -> None:
    """After a write that changes what `rows` are computed from: once it commits, request them
    again (`mark_requested`, `again`), outside its transaction, whose locks it need not hold."""
    on_commit_derived(lambda: mark_requested(work, rows, key=key, new=new, again=True))


def recomputed(work: Derived, started: datetime, key=None, **fields) -> bool:
    """After a recompute of `key`'s rows that read its data from `started` on: clear their
    requests made until then (setting `fields` on them too); if one of them is requested still,
    by a write since, send the recompute again after `repeat_after_s`. True then."""
    _rows_of(work, key).filter(requested_at__lte=started).update(requested_at=None, **fields)
    return _repeated_if_requested(work, key)


def _repeated_if_requested(work: Derived, key) -> bool:
    """Send `key`'s recompute again after `repeat_after_s` if one of its rows is requested
    still (by a write since the recompute read its data). True then."""
    again = _rows_of(work, key).filter(work.due).exists()
    if again:
        send_derived(work, key, countdown=work.repeat_after_s)
    return again


class Reducer(Protocol):
    """One kind's row, computed from a pass over data shared with other kinds, a piece at a time."""

    def add(self, piece) -> None: ...

    def fields(self) -> dict:
        """The row's fields, once every piece was added."""


@dataclass(frozen=True)
class Part:
    """A kind computed in a pass over shared data (`recompute_pass`): the kind, and its
    reducer, started from the pass's subject."""

    work: Derived
    reducer: Callable[[Any], Reducer]


def recompute_pass(key, parts: Sequence[Part], source: Callable[[], tuple[Any, Iterable] | None]) -> None:
    """In a worker: recompute `key`'s rows of the `parts` requested since they were last computed
    (not those computed since: a message sent twice), in one pass over the pieces that `source()`
    gives with its subject (None: the subject is gone, nothing to store), and store each as its
    reducer's `fields()` give, clearing the requests it answers (`recomputed`). A part whose
    reducer raises DataChanged runs again after `repeat_after_s`; one that fails records why in
    its row's `error`, which keeps its previous figures; either way the others go on. For
    stores of one row per key with `computed_at` and `error`."""
    started = timezone.now()
    due = [part for part in parts if not _answered(part.work, key)]
    if not due:
        return
    try:
        opened = source()
    except Exception as error:  # the data of every part
        for part in due:
            _failed(part.work, key, started, error)
        return
    if opened is None:
        return
    subject, pieces = opened
    reducers = {}
    for part in due:
        ok, reducer = _guarded(part.work, key, started, part.reducer, subject)
        if ok:
            reducers[part] = reducer
    try:
        for piece in pieces:
            for part, reducer in list(reducers.items()):
                if not _guarded(part.work, key, started, reducer.add, piece)[0]:
                    del reducers[part]
            if not reducers:
                return
    except Exception as error:  # reading the pieces: the data of every part still in the pass
        for part in reducers:
            _failed(part.work, key, started, error)
        return
    for part, reducer in reducers.items():
        ok, fields = _guarded(part.work, key, started, reducer.fields)
        if ok:
            _stored(part.work, key, started, fields)


def _answered(work: Derived, key) -> bool:
    """Whether `key`'s row was computed since it was last requested."""
    asked = _rows_of(work, key).values_list("requested_at", "computed_at").first()
    return asked is not None and asked[0] is None and asked[1] is not None


def _stored(work: Derived, key, started: datetime, fields: dict) -> None:
    """Store `key`'s row as computed from the data read from `started` on, clearing the requests
    it answers in the same UPDATE (as `recomputed` does). A write's mark made the row; one
    computed before anything asked (a command, a test) is made first. A request made since
    sends the recompute again."""
    rows = _rows_of(work, key)
    answered = Case(When(requested_at__lte=started, then=Value(None)), default=F("requested_at"),
                    output_field=DateTimeField())
    stored = {**fields, "computed_at": timezone.now(), "error": "", "requested_at": answered}
    if not rows.update(**stored):  # computed before anything asked for it (a command, a test)
        work.model.objects.bulk_create([work.model(**{work.key: key})], ignore_conflicts=True)
        rows.update(**stored)
    _repeated_if_requested(work, key)


def _guarded(work: Derived, key, started: datetime, step: Callable, *args) -> tuple[bool, Any]:
    """`step(*args)` for one part of a pass: (True, what it returned), or (False, None) when it
    raised: DataChanged sends the part's recompute again after `repeat_after_s`, any other
    error is recorded in its row."""
    try:
        return True, step(*args)
    except DataChanged:
        send_derived(work, key, countdown=work.repeat_after_s)
    except Exception as error:  # one part's failure must not hide the others' figures
        _failed(work, key, started, error)
    return False, None


def _failed(work: Derived, key, started: datetime, error: Exception) -> None:
    """Record why `key`'s recompute failed in its row (called while handling `error`)."""
    log.exception("%s %s=%s failed", work.kind, work.key, key)
    recomputed(work, started, key, error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"
               [:FAILURE_CHARS])


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
    and its grading panel's (the pages show the previous ones as updating), and send their one
    task if one of them was not requested already: grading a step's groups sends one message
    while its recompute is pending."""
    def request() -> None:
        newly = [_requested(work, work.model.objects.filter(batch_id=batch_id), new=[work.model(batch_id=batch_id)],
                            again=True) for work in BATCH_FIGURES]
        if any(newly):
            send_derived_after_commit(RUN_FIGURES, batch_id)

    on_commit_derived(request)


# --- after the transaction's other messages ------------------------------------------------

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
