"""Run a candidate's tests on a private copy of the codebase, contained.

`prepare_workdir` copies the codebase and applies the candidate's patch, or refuses it
(`PatchRefused`); a sandbox (`make_sandbox`, one backend per deployment: `bwrap` or a
`command` template) runs a command there under `Limits` and answers a `RunResult`;
`check_backend` tells a worker at start whether its sandbox can run at all
(`SandboxConfigError`). docs/sandbox.md says what each limit and status means.
"""

from grading.sandbox.bwrap import BwrapSandbox
from grading.sandbox.command import CommandSandbox
from grading.sandbox.config import BACKENDS, Sandbox, SandboxConfig, check_backend, make_sandbox
from grading.sandbox.errors import PatchRefused, SandboxConfigError
from grading.sandbox.limits import STATUSES, Limits, RunResult
from grading.sandbox.workdir import prepare_workdir, remove_tree

__all__ = [
    "BACKENDS", "STATUSES", "BwrapSandbox", "CommandSandbox", "Limits", "PatchRefused",
    "RunResult", "Sandbox", "SandboxConfig", "SandboxConfigError", "check_backend",
    "make_sandbox", "prepare_workdir", "remove_tree",
]
