"""Rollouts sent as a request body, streamed to a file under DATA_DIR: never held in memory whole.

The body is JSON Lines; `Content-Encoding: gzip` or `zstd` says it is compressed. The
file gets the matching suffix, so the importer checks the bytes against it as it does
for any file. The request must say its length (the development server and Django
cannot read a chunked body), and a body over GAGAR_API_UPLOAD_LIMIT is refused before
a byte of it is read. A body cut short (the client went away) is a 400, nothing imported;
what is imported is read under the import's limits (grading/limits.py), so that a small
compressed body cannot keep the request's thread busy after its client is gone.
"""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from ninja.errors import HttpError

SUFFIXES = {"identity": "", "gzip": ".gz", "zstd": ".zst"}
CHUNK = 1024 * 1024


def scratch_folder() -> Path:
    """A fresh folder for one request's files; the caller removes it."""
    root = settings.DATA_DIR / "api"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root))


@contextmanager
def received_body(request, *, filename: str) -> Iterator[Path]:
    """The request's body as a file named `filename` (plus .gz or .zst by its encoding),
    removed on exit. HttpError 411, 413 or 415 when the body cannot be taken."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower() or "identity"
    if encoding not in SUFFIXES:
        raise HttpError(415, f"Content-Encoding {encoding!r} is not supported: send gzip, zstd or none")
    length = request.headers.get("Content-Length", "")
    if not length.isdigit():
        raise HttpError(411, "Content-Length is required: the body is streamed to disk, not sent chunked")
    limit = settings.GAGAR_API_UPLOAD_LIMIT
    if int(length) > limit:
        raise HttpError(413, f"the body is {int(length)} bytes, over the limit of {limit} (GAGAR_API_UPLOAD_LIMIT)")
    folder = scratch_folder()
    stem = filename.removesuffix(".gz").removesuffix(".zst")
    path = folder / (stem + SUFFIXES[encoding])
    try:
        received = 0
        with path.open("wb") as out:
            while True:
                try:
                    chunk = request.read(CHUNK)
                except OSError as error:  # the client went away (Django's UnreadablePostError)
                    raise HttpError(400, f"the body ended after {received} of {int(length)} bytes: "
                                         f"{error or type(error).__name__}") from None
                if not chunk:
                    break
                received += len(chunk)
                out.write(chunk)
        if received < int(length):
            raise HttpError(400, f"the body ended after {received} of {int(length)} bytes")
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)
