"""Leases on claimed work, and lost messages, for gradings and exports alike.

A worker that claims rows (queued -> running under a fresh claim token) holds
them for GAGAR_GRADING_LEASE seconds, and renews that lease every
GAGAR_GRADING_HEARTBEAT seconds from a thread of its own process while it
works: a grader or an export may hold the working thread for a long time (a
model's generate, a long HTTP call, a large batch). A killed worker stops
renewing, and the sweep re-queues the rows whose lease ran out.

A row can also be lost before it is claimed: its message was taken by a worker
that died before claiming it (the message dies unacknowledged with it, and
Redis gives it back only after its visibility timeout, hours), or forgotten by
a broker restarted without persistence. Either way the row is queued, its
message went out, and its queue holds no message: the sweep sends it again
(`idle_queues`) once LOST_AFTER_S have passed.
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

from webapp.jobs import app

log = logging.getLogger(__name__)

# A queued row whose message was due (`sent_at`) this long ago, on a queue the broker holds
# no message of, has lost its message. Not sooner: a live worker may have just taken it and
# be about to claim the row. A message sent twice costs only its delivery: the second copy
# claims nothing.
LOST_AFTER_S = 30


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


def idle_queues(queues: set[str]) -> set[str]:
    """Those of `queues` that hold no message on the broker; kombu's OperationalError when it
    is unreachable."""
    if not queues:
        return set()
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        return {queue for queue in queues if not channel.queue_declare(queue=queue).message_count}
