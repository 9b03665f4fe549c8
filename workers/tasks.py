"""Thin tasks: primary keys in, one service call, nothing returned (the rows hold the state).

A task fails alone. Each service records its own job's failure with the reason (a grading
run's gradings, an export, a part of the audit figures); whatever still gets out of one, but
a lost database connection (retried), stops here: logged, and the task ends like any other,
its message acknowledged. A MemoryError above all must not get out: Celery's worker process
re-raises one that a pool process reports (celery.worker.request.Request.on_failure, "Process
got: ..."), so the whole worker exited ("Unrecoverable error: MemoryError") without
acknowledging the message (acks_late), and the broker handed it to the next worker, which
died of it in turn while every other task waited behind it.

A pool process killed mid-task (the kernel's out-of-memory killer) is a lost worker: a
grading or export is claimed, so its message handed again finds it taken and its lease
decides; derived data (webapp/derived.py `Derived`: renders, the search index, the audit, run
and grading panel figures) is not, so a lost one drops its message instead of handing it to
the next worker: a patch not rendered is rendered when its group is first shown, and the
derived data's sweep sends the others again later.
"""

import functools
import logging

from celery.signals import worker_init
from django.db import InterfaceError, OperationalError

from grading.sandbox import SandboxConfigError
from webapp.advantages.services import batch_figures_refresh
from webapp.audit.services import figures_refresh
from webapp.derived import (
    AUDIT_FIGURES,
    DERIVED_KINDS,
    RENDERS,
    RUN_FIGURES,
    SEARCH_INDEX,
    Derived,
    sweep_derived,
)
from webapp.evidence.services import OVER, evidence_check_sandbox, evidence_process, evidence_sweep
from webapp.exports.services import export_build, exports_sweep
from webapp.grading.services import PANEL, gradings_release, gradings_sweep
from webapp.grading.worker import gradings_process
from webapp.html.renders import batch_render, renders_sweep
from webapp.jobs import EVIDENCE_TASK, EXPORT_TASK, GRADE_TASK, SWEEP_TASK, app
from webapp.runs.services import FIGURES as STEP_FIGURES
from webapp.search.services import batch_index
from webapp.work import time_limits

log = logging.getLogger(__name__)

# A lost database connection is weather: the task runs again, backing off, on a new one.
DATABASE_ERRORS = (OperationalError, InterfaceError)
RETRY_ON_DATABASE_ERRORS = dict(
    autoretry_for=DATABASE_ERRORS,
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
)


def derived(kind: Derived) -> dict:
    """The options of a kind of derived data's task: its name and time limits, retried on a lost
    database connection, and dropped when its worker is lost (see the module's docstring)."""
    return dict(name=kind.task, **time_limits(kind.kind), **RETRY_ON_DATABASE_ERRORS, reject_on_worker_lost=False)


def fails_alone(task):
    """The task's boundary: what `task` raises, but a database error, is logged and ends it."""
    @functools.wraps(task)
    def run(**kwargs) -> None:
        try:
            task(**kwargs)
        except DATABASE_ERRORS:
            raise
        except Exception as error:  # MemoryError included: see the module's docstring
            log.exception("task %s(%s) failed, alone: %s: %s", task.__name__,
                          ", ".join(f"{k}={v!r}"[:200] for k, v in kwargs.items()), type(error).__name__, error)
    return run


@app.task(name=GRADE_TASK, **time_limits("grading"), **RETRY_ON_DATABASE_ERRORS)
@fails_alone
def grade(*, grading_ids: list[int]) -> None:
    """Grade the queued ones among `grading_ids`; the rest were claimed elsewhere or are finished."""
    gradings_process(grading_ids=grading_ids)


@app.task(name=EXPORT_TASK, **time_limits("export"), **RETRY_ON_DATABASE_ERRORS)
@fails_alone
def export(*, export_id: int) -> None:
    """Build the export if it is still queued; otherwise it was claimed elsewhere or is finished."""
    export_build(export_id)


@app.task(**derived(RENDERS))
@fails_alone
def render(*, batch_id: int) -> None:
    """Render the batch's patches for the group page, those not stored yet (a cache: one that
    fails is rendered when its group is first shown)."""
    batch_render(batch_id)


@app.task(**derived(SEARCH_INDEX))
@fails_alone
def search_index(*, batch_id: int) -> None:
    """Index the batch's trajectories for search, those not indexed yet."""
    batch_index(batch_id)


@app.task(**derived(AUDIT_FIGURES))
@fails_alone
def audit_figures() -> None:
    """Recompute the audit dashboard's requested figures."""
    figures_refresh()


@app.task(**derived(RUN_FIGURES))  # GRADING_PANEL's task too (webapp/derived.py: they share it)
@fails_alone
def batch_figures(*, batch_id: int) -> None:
    """Recompute a batch's requested figures, its run page's and its grading panel's, in one
    pass over its advantages."""
    batch_figures_refresh(batch_id, (STEP_FIGURES, PANEL))


@app.task(name=EVIDENCE_TASK, **time_limits("evidence"), **RETRY_ON_DATABASE_ERRORS)
@fails_alone
def evidence(*, group_id: int) -> None:
    """Gather the group's execution evidence if its pass is still queued; once the pass is over,
    send the group's gradings, which waited for it."""
    if evidence_process(group_id=group_id) in OVER:
        gradings_release(group_pks=[group_id])


@worker_init.connect
def check_sandbox(**_) -> None:
    """A sandbox that cannot run (bwrap missing, a container runtime without its daemon, run
    folders the sandbox's user cannot reach) stops the worker at start with the reason, rather
    than failing every group's evidence pass."""
    try:
        evidence_check_sandbox()
    except SandboxConfigError as error:
        raise SystemExit(f"execution evidence: the sandbox cannot run here: {error}") from None


@app.task(name=SWEEP_TASK, **time_limits("sweep"))
@fails_alone
def sweep() -> None:
    evidence_sweep()  # first: the gradings of a pass it gives up on are sent by the next line
    gradings_sweep()
    exports_sweep()
    renders_sweep()
    for kind in DERIVED_KINDS:
        sweep_derived(kind)
