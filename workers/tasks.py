"""Thin tasks: primary keys in, one service call, nothing returned (the rows hold the state)."""

from django.db import InterfaceError, OperationalError

from webapp.audit.services import figures_refresh, figures_sweep
from webapp.exports.services import export_build, exports_sweep
from webapp.grading.services import gradings_sweep
from webapp.grading.worker import gradings_process
from webapp.jobs import AUDIT_FIGURES_TASK, EXPORT_TASK, GRADE_TASK, RENDER_TASK, SEARCH_INDEX_TASK, SWEEP_TASK, app
from webapp.review.renders import batch_render, renders_sweep
from webapp.search.services import batch_index, index_sweep

# A lost database connection is weather: the task runs again, backing off, on a new one.
RETRY_ON_DATABASE_ERRORS = dict(
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
)


@app.task(name=GRADE_TASK, **RETRY_ON_DATABASE_ERRORS)
def grade(*, grading_ids: list[int]) -> None:
    """Grade the queued ones among `grading_ids`; the rest were claimed elsewhere or are finished."""
    gradings_process(grading_ids=grading_ids)


@app.task(name=EXPORT_TASK, **RETRY_ON_DATABASE_ERRORS)
def export(*, export_id: int) -> None:
    """Build the export if it is still queued; otherwise it was claimed elsewhere or is finished."""
    export_build(export_id)


@app.task(name=RENDER_TASK, **RETRY_ON_DATABASE_ERRORS)
def render(*, batch_id: int) -> None:
    """Render the batch's patches for the group page, those not stored yet."""
    batch_render(batch_id)


@app.task(name=SEARCH_INDEX_TASK, **RETRY_ON_DATABASE_ERRORS)
def search_index(*, batch_id: int) -> None:
    """Index the batch's trajectories for search, those not indexed yet."""
    batch_index(batch_id)


@app.task(name=AUDIT_FIGURES_TASK, **RETRY_ON_DATABASE_ERRORS)
def audit_figures() -> None:
    """Recompute the audit dashboard's requested figures."""
    figures_refresh()


@app.task(name=SWEEP_TASK)
def sweep() -> None:
    gradings_sweep()
    exports_sweep()
    renders_sweep()
    index_sweep()
    figures_sweep()
