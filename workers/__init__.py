"""Celery app and tasks; `celery -A workers worker` finds `app` here."""

from workers.celery import app

__all__ = ["app"]
