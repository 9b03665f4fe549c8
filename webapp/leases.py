"""Leases on claimed work, for gradings and exports alike.

A worker that claims rows (queued -> running under a fresh claim token) holds
them for GAGAR_GRADING_LEASE seconds, and renews that lease every
GAGAR_GRADING_HEARTBEAT seconds from a thread of its own process while it
works: a grader or an export may hold the working thread for a long time (a
model's generate, a long HTTP call, a large batch). A killed worker stops
renewing, and the sweep re-queues the rows whose lease ran out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import QuerySet
from django.utils import timezone

log = logging.getLogger(__name__)


def lease_expiry(now: datetime | None = None) -> datetime:
    """When a lease taken or renewed now runs out."""
    return (now or timezone.now()) + timedelta(seconds=settings.GAGAR_GRADING_LEASE)


@contextmanager
def lease_renewed(claimed: Callable[[], QuerySet], name: str) -> Iterator[None]:
    """Renew the lease of the rows `claimed()` selects (those still held under this claim)
    from a thread of this process while the block runs. `name` names the thread."""
    stop = threading.Event()

    def renew():
        try:
            while not stop.wait(settings.GAGAR_GRADING_HEARTBEAT):
                try:
                    claimed().update(lease_expires_at=lease_expiry())
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
