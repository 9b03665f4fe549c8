"""Exports: launch, build (in a worker, or in-process for the `export` command), sweep.

As with gradings, the Export row is the truth and broker messages only carry its
primary key. A worker claims a queued export by a conditional update (queued ->
running, a fresh claim token), builds its files in a folder of its own named after
the claim, and renames that folder into place and marks the row done only while
the claim holds. So a second delivery claims nothing, a failure leaves no half
file, and a worker that was lost leaves a running row that the sweep queues again
(its half-built folder removed) until the attempts run out; a build past its soft
time limit is queued again the same way. The claim, the lease and the sweep are
those of every kind of claimed work (webapp/work.py, `EXPORTS`).

An advantages export waits for its batch's grading (`advantages_ready`): launched
while a grading is queued or running it is refused, unless `allow_ungraded`; its
manifest counts the groups it left without a ranking, and why, either way. A grader SFT
export with no group to write is refused at launch (`check_sft`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.utils import timezone

from grading.advantages import LABELS
from webapp import work
from webapp.advantages.chunks import SOURCES
from webapp.advantages.config import parse_advantage_config
from webapp.exports.advantages import SCHEMA, Progress, write_counted
from webapp.exports.formats import UnknownFormat, export_format
from webapp.exports.selectors import advantages_ready, exports_root, unfinished_gradings
from webapp.jobs import CPU, EXPORT_TASK
from webapp.models import Batch, Export
from webapp.rankings import UNRESTRICTED, Viewer
from webapp.roles import may_export

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED = Export.Status.QUEUED, Export.Status.RUNNING, Export.Status.DONE, Export.Status.FAILED
ACTIVE = (QUEUED, RUNNING)
ADVANTAGES, SFT = Export.Kind.ADVANTAGES, Export.Kind.SFT
MANIFEST = "manifest.json"
ERROR_CHARS = 4000


EXPORTS = work.Claimed(kind="export", model=Export, task=EXPORT_TASK,
                       messages=lambda pks: [{"export_id": pk} for pk in pks],
                       on_lost=lambda pk, token: remove_half_built(pk, token), reset={"rows_done": 0})


class ExportError(ValueError):
    """An export that cannot be made as asked: "field: reason"."""


class GradingUnfinished(ExportError):
    """An advantages export launched, without `allow_ungraded`, while grading of its batch is
    queued or running."""


class ClaimLost(Exception):
    """The export's row moved on (swept, claimed again) while this worker built it."""


def export_config(*, batch: Batch, kind: str, format: str, config: Mapping) -> dict:
    """The complete, validated configuration an export of `kind` will be made with.

    `format` is one of the kind's registered formats (webapp/exports/formats.py).
    Advantages: `config` overrides the batch's redistribution config (fields of
    AdvantageConfig; {} keeps it). Grader SFT: `config` holds its options. ExportError
    names the field and the reason."""
    if kind not in Export.Kind.values:
        raise ExportError(f"kind: must be one of {', '.join(Export.Kind.values)}, not {kind!r}")
    try:
        export_format(kind, format)
    except UnknownFormat as error:
        raise ExportError(str(error)) from None
    if kind == ADVANTAGES:
        try:
            base = parse_advantage_config(batch.advantage_config)
            return parse_advantage_config(config, base=base).as_dict()
        except (ValueError, TypeError) as error:
            raise ExportError(f"config: {error}") from None
    from webapp.exports.sft import parse_sft_options  # the SFT export's own module

    try:
        return parse_sft_options(config)
    except ValueError as error:
        raise ExportError(f"config: {error}") from None


def export_launch(*, batch: Batch, kind: str, format: str, config: Mapping, user,
                  allow_ungraded: bool = False) -> Export:
    """Queue an export of `batch`, or return the identical one already queued or running.
    The message goes out once the transaction commits. An advantages export is refused
    (GradingUnfinished) while grading of the batch is under way, unless `allow_ungraded`;
    a grader SFT export with nothing to export is refused (ExportError)."""
    if not may_export(user):
        raise PermissionDenied("exports are for researchers")
    config = export_config(batch=batch, kind=kind, format=format, config=config)
    if kind == SFT:
        refuse_empty_sft(batch, user=user, options=config)
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
        work.send_claimed_after_commit(EXPORTS, [(export.pk, CPU)])
    return export


def refuse_empty_sft(batch: Batch, *, user, options: dict) -> None:
    """Refuse (ExportError, write_sft's words) a grader SFT export with nothing to write, as
    the `export` command does, rather than queue one that can only fail in the worker."""
    from webapp.exports.sft import check_sft  # the SFT export's own module

    try:
        check_sft(batch, viewer=Viewer(user), options=options)
    except ValueError as error:
        raise ExportError(str(error)) from None


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


def export_build(export_id: int) -> None:
    """In a worker: claim the export if it is still queued, build its files, finish it."""
    token = work.new_token()
    now = timezone.now()
    if not work.claim(EXPORTS, [export_id], token, now, started_at=now, rows_done=0):
        return
    export = Export.objects.select_related("batch", "created_by").get(pk=export_id)
    mine = Export.objects.filter(pk=export_id, status=RUNNING, claim_token=token)

    def progress(done: int, total: int) -> None:
        if not mine.update(rows_done=done, rows_total=total):
            raise ClaimLost

    building = exports_root() / f"{export.pk}.{token}.tmp"
    try:
        with work.lease_renewed(EXPORTS, lambda: mine, f"export-lease-{token[:8]}"):
            files = export_files(batch=export.batch, kind=export.kind, format=export.format, config=export.config,
                                 folder=building, export_id=export.pk, created_by=export.created_by,
                                 viewer=_viewer(export), on_progress=progress)
        _finish(export, token, building, files)
    except ClaimLost:
        log.warning("export %s: claim lost while building; its result is dropped", export_id)
    except SoftTimeLimitExceeded:
        # Not a broken export: another attempt, as for a lost worker, until they run out. The
        # limit may have struck in the middle of a query (psycopg then refuses the next one):
        # the row is written on a fresh connection.
        connection.close()
        why = f"ran past its soft time limit ({work.setting(EXPORTS.kind, 'SOFT_TIME_LIMIT')} s)"
        log.warning("export %s: attempt %s %s", export_id, export.attempts, why)
        if work.attempt_lost(EXPORTS, export.pk, token, why, timezone.now()) == QUEUED:
            try:
                work.send_claimed(EXPORTS, [(export.pk, CPU)])
            except work.BrokerUnavailable as error:
                log.warning("export %s waits for the sweep to send it: %s", export_id, error)
    except Exception as error:  # whatever broke the build, the row says so and no file is left
        log.exception("export %s failed", export_id)
        mine.update(status=FAILED, error=_message(error), finished_at=timezone.now())
    finally:
        shutil.rmtree(building, ignore_errors=True)


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
    fmt = export_format(kind, format)
    if kind == ADVANTAGES:
        written = write_counted(batch, folder / (data_name or f"advantages.{fmt.extension}"), viewer=viewer,
                                format=format, config=parse_advantage_config(config), on_progress=on_progress)
        manifest.update(
            rows=written.rows,
            columns=[{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in SCHEMA],
            counts={"label": {label: written.labels[label] for label in LABELS},
                    "source": {source: written.sources[source] for source in SOURCES}},
            ungraded=written.ungraded(),
            **written.about,
        )
    else:
        manifest["summary"] = fmt.write()(batch, folder, viewer=viewer, options=config, on_progress=on_progress)
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


def exports_sweep(*, resend_after: float | None = None) -> work.Sweep:
    """The sweep of exports (webapp/work.py's `sweep`): a lost worker's half-built folder goes too."""
    return work.sweep(EXPORTS, resend_after=resend_after)


def remove_half_built(pk: int, token: str) -> None:
    """What a lost worker left of the export it was building under `token`."""
    shutil.rmtree(exports_root() / f"{pk}.{token}.tmp", ignore_errors=True)
