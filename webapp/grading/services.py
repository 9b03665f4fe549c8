"""Grading jobs: launch, sweep, retry. Workers process them in `worker`.

The Grading rows are the truth; broker messages only carry their primary keys
and may be lost, delayed or delivered twice. A worker claims a row by a
conditional update (queued -> running with a fresh claim token) and writes the
result only while that claim holds, so a duplicate delivery finds nothing to
claim and a late finisher whose row was swept and regraded writes nothing. A
lost message is made good by the sweep, which re-sends queued rows that waited
too long and re-queues running rows whose worker is gone.
"""

from __future__ import annotations

import dataclasses
import functools
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

from grading.profiles import QUEUES, Profile, ProfileError, load_profiles
from webapp.bulk import insert_rows
from webapp.grading import sql
from webapp.jobs import GPU, GRADE_TASK, app
from webapp.models import Batch, Grading, GradingRun, Group

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED = (Grading.Status.QUEUED, Grading.Status.RUNNING,
                                 Grading.Status.DONE, Grading.Status.FAILED)
ACTIVE = (QUEUED, RUNNING)
# A launch of at least this many gradings refreshes PostgreSQL's statistics of the table.
ANALYZE_AFTER = 1000


class LaunchError(ValueError):
    """A launch that cannot start: unknown grader, bad configuration."""


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


@dataclass(frozen=True)
class Launch:
    run: GradingRun | None
    queued: int
    skipped: int


def grading_launch(*, batch: Batch, grader: str, config: dict | None = None, user=None,
                   regrade: bool = False, queue: str | None = None) -> Launch:
    """Queue a Grading for every mixed group of `batch`.

    Skips groups that already have a queued or running grading by the same
    grader and configuration, and, unless `regrade`, those it already graded.
    Messages go out once the transaction commits.
    """
    try:
        json.dumps(config or {})
    except (TypeError, ValueError) as error:
        raise LaunchError(f"grader configuration is not JSON: {error}") from None
    profile = grader_profile(grader, config, queue=queue)
    # The run keeps the whole profile: workers build the grader from it, with no file.
    config = json.loads(json.dumps(asdict(profile)))
    skip = ACTIVE if regrade else (*ACTIVE, DONE)
    busy = set(
        Grading.objects.filter(run__batch=batch, run__grader=grader, run__config=config, status__in=skip)
        .values_list("group_id", flat=True)
    )
    group_pks = [pk for pk in Group.objects.filter(batch=batch, label=Group.Label.MIXED)
                 .order_by("pk").values_list("pk", flat=True) if pk not in busy]
    if not group_pks:
        return Launch(run=None, queued=0, skipped=len(busy))
    with transaction.atomic():
        run = GradingRun.objects.create(batch=batch, grader=grader, config=config,
                                        queue=profile.queue, created_by=user)
        template = Grading(run=run, queued_at=timezone.now(), attempt_limit=settings.GAGAR_GRADING_MAX_ATTEMPTS)
        row = {f.attname: getattr(template, f.attname) for f in Grading._meta.concrete_fields if not f.primary_key}
        ids = insert_rows(Grading, [{**row, "group_id": pk} for pk in group_pks])
        if len(ids) >= ANALYZE_AFTER:
            transaction.on_commit(sql.analyze_gradings, robust=True)
        transaction.on_commit(functools.partial(enqueue, ids, run.queue), robust=True)
    return Launch(run=run, queued=len(ids), skipped=len(busy))


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


def _enqueue_by_queue(pairs: Iterable[tuple[int, str]], *, countdown: float | None = None) -> None:
    by_queue: dict[str, list[int]] = defaultdict(list)
    for pk, queue in pairs:
        by_queue[queue].append(pk)
    for queue, ids in by_queue.items():
        enqueue(sorted(ids), queue, countdown=countdown)


# --- sweep and retry ------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    requeued: int  # were running too long: queued again
    failed: int    # were running too long and had no attempt left
    resent: int    # were queued too long: their message sent again


def gradings_sweep(*, stuck_after: float | None = None, resend_after: float | None = None) -> Sweep:
    """Re-queue gradings stuck in running, fail those out of attempts, re-send stale queued ones."""
    stuck_after = settings.GAGAR_GRADING_STUCK_AFTER if stuck_after is None else stuck_after
    resend_after = settings.GAGAR_GRADING_RESEND_AFTER if resend_after is None else resend_after
    now = timezone.now()
    requeued, failed = [], 0
    stuck = (Grading.objects.filter(status=RUNNING, claimed_at__lt=now - timedelta(seconds=stuck_after))
             .values_list("pk", "claim_token", "attempts", "attempt_limit", "run__queue"))
    for pk, token, attempts, limit, queue in stuck:
        mine = Grading.objects.filter(pk=pk, status=RUNNING, claim_token=token)
        if attempts >= limit:
            failed += mine.update(
                status=FAILED, finished_at=now,
                error=f"gave up after {attempts} attempts: still running after {stuck_after:g} s "
                      "(its worker was probably lost)")
        elif mine.update(status=QUEUED, claim_token="", queued_at=now,
                         error=f"attempt {attempts} lost its worker; queued again by the sweep"):
            requeued.append((pk, queue))
    stale = list(Grading.objects.filter(status=QUEUED, queued_at__lt=now - timedelta(seconds=resend_after))
                 .values_list("pk", "run__queue"))
    # Send first: if the broker is down, the rows stay overdue and the next sweep tries again.
    _enqueue_by_queue(requeued + stale)
    resent = Grading.objects.filter(pk__in=[pk for pk, _ in stale], status=QUEUED).update(queued_at=now)
    if requeued or failed or stale:
        log.warning("sweep: %d requeued, %d failed, %d re-sent", len(requeued), failed, resent)
    return Sweep(requeued=len(requeued), failed=failed, resent=resent)


def gradings_retry_failed(*, batch: Batch) -> int:
    """Queue the failed gradings of `batch` again, with a fresh set of attempts."""
    with transaction.atomic():
        rows = list(Grading.objects.select_for_update().filter(run__batch=batch, status=FAILED)
                    .values_list("pk", "run__queue"))
        now = timezone.now()
        Grading.objects.filter(pk__in=[pk for pk, _ in rows], status=FAILED).update(
            status=QUEUED, error="", claim_token="", queued_at=now, finished_at=None,
            attempt_limit=F("attempts") + settings.GAGAR_GRADING_MAX_ATTEMPTS,
        )
        transaction.on_commit(functools.partial(_enqueue_by_queue, rows), robust=True)
    return len(rows)
