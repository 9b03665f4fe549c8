"""Reads of exports: a batch's list, and the path of one finished export's file."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from webapp.models import Batch, Export


def exports_root() -> Path:
    """Where export folders live: DATA_DIR/exports/<export id>/."""
    return settings.DATA_DIR / "exports"


def batch_exports(batch: Batch, *, limit: int = 20) -> list[Export]:
    """The latest `limit` exports of `batch`, newest first."""
    return list(Export.objects.filter(batch=batch).select_related("created_by")[:limit])


def export_file(export: Export, name: str) -> Path:
    """The path of the file `name` of a finished export; LookupError if it has none such."""
    if export.status != Export.Status.DONE:
        raise LookupError(f"export #{export.pk} is {export.status}, not done")
    if name not in {f["name"] for f in export.files}:
        raise LookupError(f"export #{export.pk} has no file named {name!r}")
    return exports_root() / export.folder / name
