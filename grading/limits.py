"""What one import may read and hold, in one place: the command line, the batches page
and the API read their files under these limits (the app may set some: GAGAR_MAX_*).

An import comes from whoever sends it, so its work is bounded whatever the files hold: a
line (or a whole JSON file, such as a ``.traj``) at most ``line_bytes`` once decompressed;
all the files of one import at most ``import_bytes`` decompressed and ``import_lines``
lines, blank lines included (a small compressed file of blank lines is a decompression
bomb); and the import stops at its ``errors``-th error. A group may hold at most
``group_size`` trajectories.

The lengths of the short text fields are those of the database columns that store
them (webapp/models/rollouts.py uses these constants), so that an import is refused in
the same words on SQLite, which does not enforce a column's length, and on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINE_BYTES = 32 * 1024**2  # a line of JSON Lines, or a whole JSON file: one record
MAX_IMPORT_BYTES = 8 * 1024**3  # all the files of one import, decompressed
MAX_IMPORT_LINES = 10_000_000  # lines of one import, blank ones included
MAX_ERRORS = 100  # an import stops at this many errors
SHOWN_ERRORS = 50  # of which the first are listed
MAX_GROUP_SIZE = 50_000  # trajectories of one group

MAX_ID_CHARS = 512  # group_id, trajectory_id, task.id
MAX_REPO_CHARS = 512  # task.repo
MAX_BASE_COMMIT_CHARS = 128  # task.base_commit


@dataclass(frozen=True)
class Limits:
    """The limits of one import (the defaults above unless given)."""

    line_bytes: int = MAX_LINE_BYTES
    import_bytes: int = MAX_IMPORT_BYTES
    import_lines: int = MAX_IMPORT_LINES
    errors: int = MAX_ERRORS
    group_size: int = MAX_GROUP_SIZE

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


def size_in_words(n: int) -> str:
    """A byte count as people read it: ``16 GiB``, ``32 MiB``, ``1000 bytes``."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"
