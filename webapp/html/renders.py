"""The render store: each patch parsed and highlighted once, for every web process.

The group page asks for the renders of its patches (`rendered`): those stored
at this renderer version come back from bytes, with no parse and no
highlighting; the others are rendered there and then and stored, so the
page never waits on a worker. After an import commits, a worker renders
the batch's patches ahead of the first visit (`batch_render`).

Why no outbox and no claim (as gradings and exports have): a render is a
cache. A lost message costs only what the first visit of a group costs
without the store, two workers rendering the same patch store it once
(the insert ignores a conflict), and there is nothing to resend; so the
message is sent once the import commits (webapp/derived.py: `renders_stale`, the
derived kind `RENDERS`), and a broker outage is logged.

Cleanup: a render is keyed by the digest of the patch text and shared by
every batch that holds that text; `BatchPatch` records which batch holds
which digest and goes with its batch. The sweep deletes the renders of
other renderer versions and those no batch holds any more.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterable, Iterator, Mapping

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from grading.diffs import FileDiff, ParsedPatch
from webapp.html.patches import (
    RENDERER_VERSION,
    RenderedFile,
    RenderedPatch,
    digest,
    render_key,
    render_patch,
    size_of,
)
from webapp.models import Batch, BatchPatch, Group, PatchRender, Trajectory

log = logging.getLogger(__name__)

RENDER_CHUNK = 200  # patches read, rendered and stored at a time by the worker


# --- to bytes and back --------------------------------------------------------------

def render_payload(view: RenderedPatch) -> bytes:
    """What `render_from_payload` needs besides the text, as compressed JSON (ASCII:
    a lone surrogate in a patch survives as an escape)."""
    data = {
        "error": view.parsed.error,
        "change": view.change,
        "files": [[f.path, f.old_path, f.status, f.added, f.removed, sorted(f.markers), f.is_test]
                  for f in view.parsed.files],
        "shown": [[fv.index, fv.html, fv.rows, fv.more_from, fv.shown] for fv in view.files.values()],
    }
    return zlib.compress(json.dumps(data, separators=(",", ":")).encode("ascii"), 6)


def render_from_payload(text: str, key: str, payload: bytes) -> RenderedPatch:
    """The view `render_payload` was made from, without parsing or highlighting `text`."""
    data = json.loads(zlib.decompress(payload))
    files = tuple(FileDiff(path=path, old_path=old_path, status=status, hunks=(), added=added, removed=removed,
                           markers=frozenset(markers), is_test=is_test)
                  for path, old_path, status, added, removed, markers, is_test in data["files"])
    shown = {files[i].path: RenderedFile(diff=files[i], html=html, rows=rows, more_from=more_from, shown=count, index=i)
             for i, html, rows, more_from, count in data["shown"]}
    return RenderedPatch(key=key, text=text, parsed=ParsedPatch(files=files, error=data["error"]),
                         change=data["change"], files=shown, size=size_of(text, shown))


# --- the page's side ----------------------------------------------------------------

def rendered(by_digest: Mapping[str, str], *, batch_id: int, lazy: bool = True) -> dict[str, RenderedPatch]:
    """The views of patch texts by their digest: stored ones from the store, the others
    rendered now and stored as held by batch `batch_id`. Not `lazy`: every hunk rendered."""
    found = _stored(by_digest, lazy)
    fresh = {d: render_patch(text, render_key(d, lazy), lazy) for d, text in by_digest.items() if d not in found}
    if fresh:
        _store(fresh, lazy=lazy, batch_id=batch_id, held=fresh)
    return found | fresh


def _stored(by_digest: Mapping[str, str], lazy: bool) -> dict[str, RenderedPatch]:
    rows = PatchRender.objects.filter(digest__in=list(by_digest), eager=not lazy, version=RENDERER_VERSION)
    return {d: render_from_payload(by_digest[d], render_key(d, lazy), bytes(data))
            for d, data in rows.values_list("digest", "data")}


def _store(fresh: dict[str, RenderedPatch], *, lazy: bool, batch_id: int, held: Iterable[str]) -> None:
    """Store `fresh` renders and record that the batch holds the `held` digests, together:
    the sweep never sees a new render that no batch holds."""
    with transaction.atomic():
        PatchRender.objects.bulk_create(
            [PatchRender(digest=d, eager=not lazy, version=RENDERER_VERSION, data=render_payload(view))
             for d, view in fresh.items()], ignore_conflicts=True)
        BatchPatch.objects.bulk_create([BatchPatch(batch_id=batch_id, digest=d) for d in held],
                                       ignore_conflicts=True)


# --- the worker's side --------------------------------------------------------------

def _unique(texts: Iterable[str]) -> Iterator[tuple[str, str]]:
    seen = set()
    for text in texts:
        d = digest(text)
        if d not in seen:
            seen.add(d)
            yield d, text


def _chunks(items: Iterator, size: int) -> Iterator[list]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _patches(batch_id: int) -> Iterator[str]:
    pks = list(Trajectory.objects.filter(batch_id=batch_id).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(pks), RENDER_CHUNK):
        yield from Trajectory.objects.filter(pk__in=pks[start:start + RENDER_CHUNK]).values_list("patch", flat=True)


def _references(batch_id: int) -> Iterator[str]:
    found = Group.objects.filter(batch_id=batch_id).exclude(reference_patch=None).exclude(reference_patch="")
    return found.values_list("reference_patch", flat=True).iterator(chunk_size=RENDER_CHUNK)


def batch_render(batch_id: int) -> int:
    """In a worker: render and store the batch's patches (its groups' reference patches
    with every hunk) that are not stored at this renderer version, and record that the
    batch holds each. Returns how many it rendered; a second run renders none."""
    if not Batch.objects.filter(pk=batch_id).exists():
        return 0  # deleted since the import
    rendered = 0
    for lazy, texts in ((True, _patches(batch_id)), (False, list(_references(batch_id)))):
        for chunk in _chunks(_unique(texts), RENDER_CHUNK):
            by_digest = dict(chunk)
            present = set(PatchRender.objects.filter(digest__in=list(by_digest), eager=not lazy,
                                                     version=RENDERER_VERSION).values_list("digest", flat=True))
            fresh = {d: render_patch(text, render_key(d, lazy), lazy)
                     for d, text in by_digest.items() if d not in present}
            _store(fresh, lazy=lazy, batch_id=batch_id, held=by_digest)
            rendered += len(fresh)
    return rendered


def renders_release(*, batch_id: int) -> int:
    """Drop the batch's hold on its patches' renders (a pruned run step keeps its patches but
    not their renders): the sweep deletes those no other batch holds. Returns how many holds
    were dropped."""
    return BatchPatch.objects.filter(batch_id=batch_id).delete()[0]


def renders_sweep() -> int:
    """Delete the renders of other renderer versions and those no batch holds any more
    (their batches were deleted, or released: `renders_release`); returns how many."""
    held = BatchPatch.objects.filter(digest=OuterRef("digest"))
    deleted, _ = PatchRender.objects.filter(~Q(version=RENDERER_VERSION) | ~Exists(held)).delete()
    if deleted:
        log.info("render sweep: %d renders deleted", deleted)
    return deleted
