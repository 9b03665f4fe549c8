"""Grading jobs: launch, sweep, retry (workers process them in `worker`); and the recompute of
the grading panel's figures (`panel_refresh`, webapp.grading.figures).

The Grading rows are the truth; broker messages only carry their primary keys
and may be lost, delayed or delivered twice. A worker claims a row by a
conditional update (queued -> running with a fresh claim token and a lease it
renews while it grades) and writes the result only while that claim holds, so
a duplicate delivery finds nothing to claim and a late finisher whose row was
swept and regraded writes nothing.

The rows are also the outbox, and the claim, the lease and the sweep are those of
every kind of claimed work (webapp/work.py, `GRADINGS`): messages go out once the
transaction that queued them commits; if the broker is down they stay unsent, and
the sweep sends them, queues again the running gradings whose lease ran out, and
sends again the messages that were lost.

A grading waits for its group's execution evidence (webapp/evidence) while that pass is
queued or running (`GRADINGS.waits`: not sent, claimed or swept meanwhile); the evidence
task sends it once the pass is over (`gradings_release`), and the sweep, should that message
be lost or the pass end in its own sweep, once it waits no more.

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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from grading.profiles import QUEUES, Profile, ProfileError, load_profiles
from webapp import derived, work
from webapp.advantages.services import batch_figures_refresh
from webapp.bulk import insert_rows
from webapp.evidence.services import PENDING, evidence_launch, evidence_off_reason
from webapp.grading import sql
from webapp.grading.figures import PanelFigures
from webapp.jobs import GPU, GRADE_TASK
from webapp.models import Batch, Grading, GradingRun, Group

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE,
                                            Grading.Status.FAILED, Grading.Status.CANCELLED)
ACTIVE = (QUEUED, RUNNING)
# A launch of at least this many gradings refreshes PostgreSQL's statistics of the table.
ANALYZE_AFTER = 1000


GRADINGS = work.Claimed(kind="grading", model=Grading, task=GRADE_TASK,
                        messages=work.chunked_ids("grading_ids", "grading"), queue_lookup="run__queue",
                        limit_field="attempt_limit",
                        cancelled=Q(run__cancelled_at__isnull=False), cancelled_why="its run was cancelled",
                        waits=Q(group__evidence__status__in=PENDING))


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


@dataclass
class Launch:
    run: GradingRun | None  # None: nothing to grade
    queued: int
    skipped: int
    active_run: GradingRun | None = None  # the latest run still grading skipped groups
    sending: work.Sending = field(default_factory=work.Sending)
    # Why its groups are graded without running their code ("": the instance gathers evidence).
    evidence_off: str = ""

    @property
    def broker_error(self) -> str:
        """Why the messages are not sent yet (the broker is down; the sweep sends them once it
        is back), or "": known once the transaction that queued the gradings commits."""
        return self.sending.broker_error


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
        template = Grading(run=run, queued_at=timezone.now(), attempt_limit=work.setting(GRADINGS.kind, "MAX_ATTEMPTS"))
        row = {f.attname: getattr(template, f.attname) for f in Grading._meta.concrete_fields if not f.primary_key}
        ids = insert_rows(Grading, [{**row, "group_id": pk} for pk in group_pks])
        evidence_launch(group_pks=group_pks)  # its groups' gradings wait for it: not sent below
        if len(ids) >= ANALYZE_AFTER:
            transaction.on_commit(sql.analyze_gradings, robust=True)
        derived.batch_figures_stale(batch.pk)  # its groups are pending now
        return Launch(run=run, queued=len(ids), skipped=len(busy),
                      sending=work.send_claimed_after_commit(GRADINGS, [(pk, run.queue) for pk in ids]),
                      evidence_off=evidence_off_reason())


def gradings_release(*, group_pks: Sequence[int]) -> None:
    """Send the queued gradings of `group_pks`, which waited for their groups' execution evidence
    (webapp/evidence), now over: a refusal leaves them unsent, for the sweep."""
    rows = work.queued_rows(GRADINGS, Grading.objects.filter(group_id__in=list(group_pks), status=QUEUED))
    try:
        work.send_claimed(GRADINGS, rows)
    except work.BrokerUnavailable as error:
        log.warning("%d gradings wait for the sweep to send them: %s", len(rows), error)


def gradings_sweep(*, resend_after: float | None = None) -> work.Sweep:
    """The sweep of gradings (webapp/work.py's `sweep`)."""
    return work.sweep(GRADINGS, resend_after=resend_after)


# The grading panel's figures, its part of a batch's figures pass (`derived.GRADING_PANEL`).
PANEL = derived.Part(derived.GRADING_PANEL, lambda subject: PanelFigures(*subject))


def panel_refresh(batch_id: int) -> None:
    """Compute the grading panel's figures of batch `batch_id` alone and store them (the worker
    computes them with the run page's, in one pass: webapp.advantages.services.batch_figures_refresh)."""
    batch_figures_refresh(batch_id, (PANEL,))


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
        derived.batch_figures_stale(run.batch_id)  # its queued groups fall back, cancelled
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
            attempt_limit=F("attempts") + work.setting(GRADINGS.kind, "MAX_ATTEMPTS"),
        )
        if rows:
            derived.batch_figures_stale(batch.pk)  # its failed groups are pending again
        return Launch(run=None, queued=len(rows), skipped=0, sending=work.send_claimed_after_commit(GRADINGS, rows))
