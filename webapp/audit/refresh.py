"""The stored parts of the audit dashboard's figures (`AuditFigures`), shared by every web
process: webapp.audit.figures computes them, and webapp/derived.py's protocol keeps
them current (the kind `derived.AUDIT_FIGURES`).

A part is one kind of figures ("agreement", "gradings", "verdicts", "drift") over one batch
or every batch, for one grader version (none for the drift). Its row holds the figures as
JSON, the watermark of the data they were computed from, and `requested_at` while a
recompute is queued. A write that stales parts (a finished grading, a human ranking, a gold
mark) calls webapp/derived.py's `figures_stale`, and a page that shows a stale or missing part
asks for it here (`request`): the parts are marked requested and one message goes to the
worker, only if none of them was requested already. The worker's task recomputes every
requested part (webapp.audit.services.figures_refresh) and sends itself again, after a pause,
while writes keep requesting parts; the derived data's sweep sends it again for parts
requested long ago (a message the broker did not take, or a worker that died).

A recompute that fails (a bug, the data of one batch too much for a worker) fails alone: the
parts it was computing hold {"failed": reason} with the watermark of the data it failed on,
the others are computed as usual, and the dashboard says why instead of asking for it again;
the next write that changes their data requests them again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
import typing
from datetime import datetime

from django.utils import timezone

from webapp import derived
from webapp.models import AuditFigures

FAILED = "failed"  # the only key of a part's payload when its recompute failed
FAILURE_CHARS = 2000
ALL = "all"


def part_key(kind: str, batch_id: int | None, version: str) -> str:
    return f"{kind}:{ALL if batch_id is None else batch_id}:{version}"


def watermark(mark) -> str:
    """A short name of a part's data watermark (see figures.watermarks)."""
    return hashlib.sha256(repr(mark).encode()).hexdigest()


def read(keys: list[str]) -> dict[str, AuditFigures]:
    return {row.key: row for row in AuditFigures.objects.filter(key__in=keys)}


def store(parts: dict[tuple[str, int | None, str], tuple[str, object]]) -> None:
    """Store each part's (watermark, figures), by (kind, batch pk, version); a queued
    recompute of it stays queued (the data may have changed since the watermark was read)."""
    now = timezone.now()
    AuditFigures.objects.bulk_create(
        [AuditFigures(key=part_key(kind, batch_id, version), kind=kind, batch_id=batch_id, version=version,
                      watermark=mark, payload=encode(figures), computed_at=now)
         for (kind, batch_id, version), (mark, figures) in parts.items()],
        update_conflicts=True, unique_fields=["key"], update_fields=["watermark", "payload", "computed_at"])


def store_failed(parts: dict[tuple[str, int | None, str], str], reason: str) -> None:
    """Record that computing `parts` (by (kind, batch pk, version): the watermark of the data it
    failed on) failed for `reason`, in place of their figures."""
    store({part: (mark, {FAILED: reason[:FAILURE_CHARS]}) for part, mark in parts.items()})


def failure(payload) -> str | None:
    """Why a part's last recompute failed; None when it holds figures, or nothing yet."""
    if isinstance(payload, dict) and set(payload) == {FAILED}:
        return payload[FAILED]
    return None


def request(parts: list[tuple[str, int | None, str]], *, stored: set[str]) -> None:
    """Queue a recompute of `parts` (kind, batch pk, version) that are not requested yet; those
    whose keys are not in `stored` have no row yet and get one. One message, sent once the
    transaction in progress commits."""
    rows = AuditFigures.objects.filter(key__in=[part_key(*part) for part in parts])
    derived.mark_requested(derived.AUDIT_FIGURES, rows,
                           new=[AuditFigures(key=part_key(*part), kind=part[0], batch_id=part[1], version=part[2])
                                for part in parts if part_key(*part) not in stored])


def requested() -> list[tuple[str, int | None, str]]:
    return list(AuditFigures.objects.exclude(requested_at=None).values_list("kind", "batch_id", "version"))


# --- figures as JSON -----------------------------------------------------------------------


def encode(value):
    """Figures (dataclasses of numbers, strings, lists, tuples, dicts, datetimes) as JSON data."""
    if dataclasses.is_dataclass(value):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return float(value)  # numpy's floats too
    return value


def decode(kind: type, data):
    """`encode`'s output back as the `kind` it was, by the type hints of its dataclasses."""
    if data is None:
        return None
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):  # X | None
        (inner,) = [a for a in args if a is not type(None)]
        return decode(inner, data)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: decode(hints[f.name], data[f.name]) for f in dataclasses.fields(kind)})
    if origin is tuple:
        return tuple(decode(a, v) for a, v in zip(args, data, strict=True))
    if origin is list:
        return [decode(args[0], v) for v in data]
    if origin is dict:
        return {k: decode(args[1], v) for k, v in data.items()}
    if kind is datetime:
        return datetime.fromisoformat(data)
    if kind is float:
        return float(data)
    return data
