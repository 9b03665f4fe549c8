"""Exports: launch, build (in a worker, or in-process for the `export` command), sweep.

As with gradings, the Export row is the truth and broker messages only carry its
primary key. A worker claims a queued export by a conditional update (queued ->
running, a fresh claim token), builds its files in a folder of its own named after
the claim, and renames that folder into place and marks the row done only while
the claim holds. So a second delivery claims nothing, a failure leaves no half
file, and a worker that was lost leaves a running row that the sweep queues again
(its half-built folder removed) until the attempts run out; a build past its soft
time limit is queued again the same way. A queued export whose message a lost
worker had taken, or a broker forgot, is sent again by the sweep (webapp/leases.py).

An advantages export waits for its batch's grading (`advantages_ready`): launched
while a grading is queued or running it is refused, unless `allow_ungraded`; its
manifest counts the groups it left without a ranking, and why, either way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from grading.advantages import LABELS
from webapp.advantages import SOURCES, parse_advantage_config
from webapp.exports.advantages import DATA_FILE, FORMATS, SCHEMA, Progress, write_counted, writer_version
from webapp.exports.selectors import advantages_ready, exports_root, unfinished_gradings
from webapp.jobs import CPU, EXPORT_TASK, app
from webapp.leases import LOST_AFTER_S, idle_queues, lease_expiry, lease_renewed
from webapp.models import Batch, Export
from webapp.rankings import UNRESTRICTED, Viewer
from webapp.roles import may_export

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED = Export.Status.QUEUED, Export.Status.RUNNING, Export.Status.DONE, Export.Status.FAILED
ACTIVE = (QUEUED, RUNNING)
ADVANTAGES, SFT = Export.Kind.ADVANTAGES, Export.Kind.SFT
MANIFEST = "manifest.json"
ERROR_CHARS = 4000


class ExportError(ValueError):
    """An export that cannot be made as asked: "field: reason"."""


class GradingUnfinished(ExportError):
    """An advantages export launched, without `allow_ungraded`, while grading of its batch is
    queued or running."""


class ClaimLost(Exception):
    """The export's row moved on (swept, claimed again) while this worker built it."""


def export_config(*, batch: Batch, kind: str, format: str, config: Mapping) -> dict:
    """The complete, validated configuration an export of `kind` will be made with.

    Advantages: `config` overrides the batch's redistribution config (fields of
    AdvantageConfig; {} keeps it). Grader SFT: `config` holds its options, always JSON
    Lines. ExportError names the field and the reason."""
    if kind == ADVANTAGES:
        if format not in FORMATS:
            raise ExportError(f"format: must be one of {', '.join(FORMATS)}, not {format!r}")
        try:
            base = parse_advantage_config(batch.advantage_config)
            return parse_advantage_config(config, base=base).as_dict()
        except (ValueError, TypeError) as error:
            raise ExportError(f"config: {error}") from None
    if kind == SFT:
        if format != Export.Format.JSONL:
            raise ExportError(f"format: the grader SFT export is jsonl, not {format!r}")
        from webapp.exports.sft import parse_sft_options  # the SFT export's own module

        try:
            return parse_sft_options(config)
        except ValueError as error:
            raise ExportError(f"config: {error}") from None
    raise ExportError(f"kind: must be one of {', '.join(Export.Kind.values)}, not {kind!r}")


def export_launch(*, batch: Batch, kind: str, format: str, config: Mapping, user,
                  allow_ungraded: bool = False) -> Export:
    """Queue an export of `batch`, or return the identical one already queued or running.
    The message goes out once the transaction commits. An advantages export is refused
    (GradingUnfinished) while grading of the batch is under way, unless `allow_ungraded`."""
    if not may_export(user):
        raise PermissionDenied("exports are for researchers")
    config = export_config(batch=batch, kind=kind, format=format, config=config)
    with transaction.atomic():
        # One launch of a batch at a time, so that two identical ones cannot both start; a
        # grading launch takes the same lock.
        Batch.objects.select_for_update().filter(pk=batch.pk).exists()
        if kind == ADVANTAGES and not allow_ungraded:
            refuse_while_grading(batch)
        running = Export.objects.filter(batch=batch, kind=kind, format=format, config=config,
                                        status__in=ACTIVE).first()
        if running is not None:
            return running
        export = Export.objects.create(batch=batch, kind=kind, format=format, config=config, created_by=user,
                                       queued_at=timezone.now())
        transaction.on_commit(lambda: export_send(export.pk), robust=True)
    return export


def refuse_while_grading(batch: Batch) -> None:
    """Refuse an advantages export of `batch` (GradingUnfinished, saying how to go on) unless
    its advantages may be exported now (`advantages_ready`): the words the page and the API
    answer alike."""
    if advantages_ready(batch):
        return
    n = unfinished_gradings(batch).count()
    gradings, their = ("1 grading", "its group") if n == 1 else (f"{n} gradings", "their groups")
    raise GradingUnfinished(
        f"grading: {gradings} of batch {batch.name!r} {'is' if n == 1 else 'are'} queued or running: {their} "
        f"would be exported without {'its ranking' if n == 1 else 'their rankings'} (GRPO's advantages); "
        "export once grading has finished, or export anyway (allow_ungraded) and the manifest counts the groups "
        "left ungraded")


def export_send(export_id: int) -> bool:
    """Send the message of a queued export and mark it sent; False when the broker did not
    take it (logged: the export stays unsent and the sweep sends it once the broker is back)."""
    try:
        # A connection for this message, from the app's configuration as it is now.
        with app.connection_for_write() as broker:
            app.send_task(EXPORT_TASK, kwargs={"export_id": export_id}, queue=CPU, producer=broker.Producer())
    except BrokerError as error:
        log.warning("export %s waits for the sweep to send it: the broker is unreachable (%s)", export_id, error)
        return False
    Export.objects.filter(pk=export_id, status=QUEUED).update(sent_at=timezone.now())
    return True


def export_build(export_id: int) -> None:
    """In a worker: claim the export if it is still queued, build its files, finish it."""
    token = uuid.uuid4().hex
    now = timezone.now()
    claimed = Export.objects.filter(pk=export_id, status=QUEUED).update(
        status=RUNNING, claim_token=token, claimed_at=now, lease_expires_at=lease_expiry(now), started_at=now,
        attempts=F("attempts") + 1, rows_done=0)
    if not claimed:
        return
    export = Export.objects.select_related("batch", "created_by").get(pk=export_id)
    mine = Export.objects.filter(pk=export_id, status=RUNNING, claim_token=token)

    def progress(done: int, total: int) -> None:
        if not mine.update(rows_done=done, rows_total=total):
            raise ClaimLost

    work = exports_root() / f"{export.pk}.{token}.tmp"
    try:
        with lease_renewed(lambda: mine, f"export-lease-{token[:8]}"):
            files = export_files(batch=export.batch, kind=export.kind, format=export.format, config=export.config,
                                 folder=work, export_id=export.pk, created_by=export.created_by,
                                 viewer=_viewer(export), on_progress=progress)
        _finish(export, token, work, files)
    except ClaimLost:
        log.warning("export %s: claim lost while building; its result is dropped", export_id)
    except SoftTimeLimitExceeded:
        # Not a broken export: another attempt, as for a lost worker, until they run out. The
        # limit may have struck in the middle of a query (psycopg then refuses the next one):
        # the row is written on a fresh connection.
        connection.close()
        why = f"ran past its soft time limit ({settings.GAGAR_EXPORT_SOFT_TIME_LIMIT} s)"
        log.warning("export %s: attempt %s %s", export_id, export.attempts, why)
        if _attempt_lost(export.pk, token, export.attempts, why, timezone.now()) == QUEUED:
            export_send(export.pk)
    except Exception as error:  # whatever broke the build, the row says so and no file is left
        log.exception("export %s failed", export_id)
        mine.update(status=FAILED, error=_message(error), finished_at=timezone.now())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _finish(export: Export, token: str, work: Path, files: list[dict]) -> None:
    """Rename the built folder into place and mark the row done, only while the claim holds."""
    final = exports_root() / str(export.pk)
    with transaction.atomic():
        mine = Export.objects.select_for_update().filter(pk=export.pk, status=RUNNING, claim_token=token)
        if not mine.exists():
            raise ClaimLost
        # Left by a worker that renamed its folder and died before its commit.
        shutil.rmtree(final, ignore_errors=True)
        work.rename(final)
        mine.update(status=DONE, folder=final.name, files=files, error="", finished_at=timezone.now())


def _viewer(export: Export) -> Viewer:
    """Whom an export's rankings are read for: the researcher who launched it (`may_export`),
    or the operator's view once that account is gone."""
    return Viewer(export.created_by) if export.created_by is not None else UNRESTRICTED


def _attempt_lost(pk: int, token: str, attempts: int, why: str, now) -> str:
    """End attempt `attempts` of the export claimed under `token`, which ended without a
    result (`why`): queue it again, unsent (the caller or the sweep sends it), or fail it once
    GAGAR_EXPORT_MAX_ATTEMPTS have been made. Its new status; "" if the claim had moved on."""
    mine = Export.objects.filter(pk=pk, status=RUNNING, claim_token=token)
    if attempts >= settings.GAGAR_EXPORT_MAX_ATTEMPTS:
        failed = mine.update(status=FAILED, finished_at=now, lease_expires_at=None,
                             error=f"gave up after {attempts} attempts: the last one {why}")
        return FAILED if failed else ""
    queued = mine.update(status=QUEUED, claim_token="", queued_at=now, sent_at=None, lease_expires_at=None,
                         rows_done=0, error=f"attempt {attempts} {why}; queued again")
    return QUEUED if queued else ""


def _message(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"[:ERROR_CHARS]


def export_files(*, batch: Batch, kind: str, format: str, config: dict, folder: Path, export_id: int | None,
                 created_by, viewer: Viewer, on_progress: Progress | None = None,
                 data_name: str | None = None) -> list[dict]:
    """Write an export's files into `folder` (made here, must not exist) and its manifest last;
    return [{name, bytes, sha256}] of each, the manifest last. The worker and the `export`
    command both build through here. `data_name` renames the advantages data file."""
    folder.mkdir(parents=True)
    manifest = {"export_id": export_id, "kind": kind, "batch": batch.name, "format": format, "config": config}
    if kind == ADVANTAGES:
        name = data_name or DATA_FILE[format]
        written = write_counted(batch, folder / name, viewer=viewer, format=format,
                                config=parse_advantage_config(config), on_progress=on_progress)
        manifest.update(
            rows=written.rows,
            columns=[{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in SCHEMA],
            counts={"label": {label: written.labels[label] for label in LABELS},
                    "source": {source: written.sources[source] for source in SOURCES}},
            ungraded=written.ungraded(),
        )
        if format == Export.Format.PARQUET:
            manifest["writer"] = writer_version()
    else:
        from webapp.exports.sft import write_sft  # the SFT export's own module

        manifest["summary"] = write_sft(batch, folder, viewer=viewer, options=config, on_progress=on_progress)
    files = [_described(path) for path in sorted(folder.iterdir())]
    manifest.update(
        files=files,
        app_version=version("gagar-studio"),
        created_by=created_by.get_username() if created_by else None,
        created_at=timezone.now().isoformat(),
    )
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return [*files, _described(path)]


def _described(path: Path) -> dict:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return {"name": path.name, "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


@dataclass(frozen=True)
class Sweep:
    requeued: int  # their lease ran out (the worker is gone): queued again
    failed: int    # their lease ran out and they had no attempt left
    sent: int      # messages sent: unsent exports, those whose message was lost, those queued too long


def exports_sweep(*, resend_after: float | None = None) -> Sweep:
    """Queue again the running exports whose lease ran out (their worker is gone; its
    half-built folder is removed), fail those out of attempts, and send the messages of
    queued exports that have none: unsent ones (the broker was down), those whose message
    was lost (webapp/leases.py: taken by a worker that died before claiming the export, or
    forgotten by the broker), and those sent longer than `resend_after` ago
    (GAGAR_GRADING_RESEND_AFTER)."""
    resend_after = settings.GAGAR_GRADING_RESEND_AFTER if resend_after is None else resend_after
    now = timezone.now()
    requeued, failed = 0, 0
    expired = Export.objects.filter(status=RUNNING, lease_expires_at__lt=now)
    for pk, token, attempts in expired.values_list("pk", "claim_token", "attempts"):
        status = _attempt_lost(pk, token, attempts, "lost its worker", now)
        requeued += status == QUEUED
        failed += status == FAILED
        shutil.rmtree(exports_root() / f"{pk}.{token}.tmp", ignore_errors=True)
    queued = Export.objects.filter(status=QUEUED)
    due = queued.filter(sent_at=None) | queued.filter(sent_at__lt=now - timedelta(seconds=resend_after))
    late = queued.filter(sent_at__lt=now - timedelta(seconds=LOST_AFTER_S))
    try:
        if late.exists() and idle_queues({CPU}):
            due |= late
    except BrokerError as error:
        log.warning("export sweep: %d requeued, %d failed; the broker is unreachable (%s)", requeued, failed, error)
        return Sweep(requeued=requeued, failed=failed, sent=0)
    sent = 0
    for pk in due.order_by("pk").values_list("pk", flat=True):
        if not export_send(pk):
            break  # the broker is down: the next sweep tries again
        sent += 1
    if requeued or failed or sent:
        log.warning("export sweep: %d requeued, %d failed, %d sent", requeued, failed, sent)
    return Sweep(requeued=requeued, failed=failed, sent=sent)
