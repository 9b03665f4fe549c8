"""What a worker hands a grader for a group whose execution evidence was gathered
(GroupCase.code): the candidates' code, to read and to run, on the same codebase, task
environment and sandbox as that pass.

Each candidate's code, the codebase with its patch applied, is made once, on first use,
in a scratch folder of the worker's work root; leaving the access (a context manager)
removes it. A run never touches that tree: it gets a fresh copy, so nothing a run changes
stays, and what is read of it is always the candidate's code as its patch left it. The
workspace's code tools run on it (grading/workspace_code.py).
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grading.execution.environment import Environment
from grading.sandbox import PatchRefused, Sandbox, prepare_workdir, remove_tree


class CodeAccess:
    """A group's candidates' code, to read and to run: `codebase` (a plain folder, never
    written to), the task's `environment`, the `sandbox`, and `workroot`, a folder the
    sandbox's user may enter, where the scratch folder goes; runs end by `deadline`.
    `reference_patch`: the task's own fix ("" when it has none), which run_all runs beside
    the candidates."""

    def __init__(self, codebase: Path, environment: Environment, sandbox: Sandbox, workroot: Path,
                 deadline: float = math.inf, reference_patch: str = ""):
        self.codebase = codebase
        self.environment = environment
        self.sandbox = sandbox
        self.workroot = workroot
        self.deadline = deadline  # time.monotonic() past which no run starts: the worker's task has a time limit
        self.reference_patch = reference_patch
        self._scratch: Path | None = None
        self._trees: dict[str, Path | PatchRefused] = {}
        self._copies = 0

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def __enter__(self) -> CodeAccess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Remove every candidate's tree and copy."""
        if self._scratch is not None:
            remove_tree(self._scratch)
            self._scratch = None

    def tree(self, candidate: str, patch: str) -> Path:
        """The codebase with `candidate`'s `patch` applied, made the first time it is asked
        for. Raises PatchRefused (every time) when the patch does not apply or would write
        outside the tree."""
        if candidate not in self._trees:
            into = self._scratch_folder() / "trees" / str(len(self._trees))
            try:
                self._trees[candidate] = prepare_workdir(self.codebase, patch, into=into)
            except PatchRefused as refused:
                self._trees[candidate] = refused
        made = self._trees[candidate]
        if isinstance(made, PatchRefused):
            raise PatchRefused(made.path, made.reason)
        return made

    @contextmanager
    def copy(self, tree: Path) -> Iterator[Path]:
        """A fresh copy of `tree` to run in, removed afterwards."""
        self._copies += 1
        into = prepare_workdir(tree, "", into=self._scratch_folder() / "runs" / str(self._copies))
        try:
            yield into
        finally:
            remove_tree(into)

    def _scratch_folder(self) -> Path:
        if self._scratch is None:
            scratch = Path(tempfile.mkdtemp(prefix="code-", dir=self.workroot))
            for folder in (scratch, scratch / "trees", scratch / "runs"):
                folder.mkdir(exist_ok=True)
                folder.chmod(0o755)  # the sandbox's user enters the copies under runs/
            self._scratch = scratch
        return self._scratch
