"""Thin tasks: primary keys in, one service call, nothing returned (the rows hold the state)."""

from django.db import InterfaceError, OperationalError

from webapp.services.grading import gradings_sweep
from webapp.services.grading_worker import gradings_process
from workers.celery import app


@app.task(
    name="workers.tasks.grade",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
)
def grade(*, grading_ids: list[int]) -> None:
    """Grade the queued ones among `grading_ids`; the rest were claimed elsewhere or are finished."""
    gradings_process(grading_ids=grading_ids)


@app.task(name="workers.tasks.sweep")
def sweep() -> None:
    gradings_sweep()
