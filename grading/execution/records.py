"""Scripts seated in a run's copy, and the records they write there, read back safely.

The referee (reports.py), the tracer (trace.py) and the examples' driver (examples.py) each
run inside the sandbox from a folder of a random name in the run's copy, and each writes its
record there. The run's code can reach that folder (docs/sandbox.md, "Test machinery"): it
may swap the record for a link to a host file, a FIFO that would block the read, or write
past any size a record has. `read_record` follows no link, waits on no FIFO, reads a
bounded amount, and says what was wrong in words.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path


def seat(workdir: Path, prefix: str, source: str, data: Mapping[str, str] | None = None) -> str:
    """Write `source` into `workdir`, a run's copy, as the module of a new folder, both named
    `prefix` and random hex, with `data` ({file name: text}) beside it; return the name.
    Random, so that a patch cannot name it in advance (a process that looks finds it:
    docs/sandbox.md). With the folder on `sys.path`, the module imports by that name."""
    name = prefix + secrets.token_hex(16)
    (workdir / name).mkdir()
    (workdir / name / f"{name}.py").write_text(source, encoding="utf-8")
    for file, text in (data or {}).items():
        (workdir / name / file).write_text(text, encoding="utf-8")
    return name


def read_record(folder: Path, name: str, *, max_bytes: int, owner: str) -> tuple[str, list[str]]:
    """The text of the record `name` in `folder` ("" when there is none), and what was wrong
    with it, each in words naming `owner` ("the referee": "the referee's record was
    replaced ...")."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return "", [f"{owner}'s folder was removed"]
    except OSError as error:
        return "", [f"{owner}'s folder was replaced ({error.strerror})"]
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except FileNotFoundError:
        return "", []
    except OSError as error:
        return "", [f"{owner}'s record was replaced ({error.strerror})"]
    finally:
        os.close(folder_fd)
    with os.fdopen(fd, "rb") as record:
        if not stat.S_ISREG(os.fstat(record.fileno()).st_mode):
            return "", [f"{owner}'s record was replaced by something not a file"]
        data = record.read(max_bytes + 1)
    if len(data) > max_bytes:
        return "", [f"{owner}'s record was written past {max_bytes // 1024**2} MiB"]
    return data.decode("utf-8", "replace"), []
