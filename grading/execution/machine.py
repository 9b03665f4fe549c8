"""What a run and a probe share of the worker's machine: the error that says the machine, not the
candidate, kept a copy from its command, and the folder each attempt's copy goes in."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grading.sandbox import remove_tree


class MachineError(Exception):
    """A run that never reached its test command because of the worker's machine: a folder or
    copy that could not be made, git that could not work, a sandbox that could not start. No
    outcome of the candidate's. `str()` says what failed, without the machine's paths; `detail`
    is everything the machine said, for the worker's log."""

    def __init__(self, what: str, detail: str):
        super().__init__(what)
        self.detail = detail


@contextmanager
def attempt_folder(workroot: Path, key: str) -> Iterator[Path]:
    """Where this attempt's copy goes: inside `workroot`/<key>-<random>, a folder no other
    attempt shares (another worker's on the same key, or one killed midway, whose leftovers
    are the caller's sweep's), removed after."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=workroot))
        folder.chmod(0o755)  # mkdtemp's 0700 would stop the sandbox's user on its way to the copy
    except OSError as error:
        raise MachineError("the copy's folder could not be made", str(error)) from error
    try:
        yield folder / "work"
    finally:
        remove_tree(folder)
