"""A deployment's choice of sandbox, and the check a worker makes at start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grading.sandbox.bwrap import NOBODY, SYSTEM_PATHS, BwrapSandbox
from grading.sandbox.command import CommandSandbox
from grading.sandbox.errors import SandboxConfigError
from grading.sandbox.limits import Limits, RunResult

BACKENDS = ("bwrap", "command")
# Stands for `{image}` when a worker checks a template before any task names its image.
EACH_TASKS_IMAGE = "each-tasks-own-image"


class Sandbox(Protocol):
    def check(self) -> None:
        """Raise SandboxConfigError, with the reason, unless this host can run sandboxes."""

    def run(self, workdir: Path, command: list[str] | str, limits: Limits) -> RunResult:
        """Run `command` in a sandbox whose working folder is `workdir`."""


@dataclass(frozen=True)
class SandboxConfig:
    """`backend` is one of BACKENDS. `bwrap`, `run_as` and `readonly_paths` configure the
    `bwrap` backend (bwrap.BwrapSandbox); `template`, `image` and `pass_env` the `command`
    backend (command.CommandSandbox)."""

    backend: str
    bwrap: str = "bwrap"
    run_as: int = NOBODY
    readonly_paths: tuple[str, ...] = SYSTEM_PATHS
    template: str = ""
    image: str = ""
    pass_env: tuple[str, ...] = ()


def make_sandbox(config: SandboxConfig) -> Sandbox:
    """The sandbox `config` names; SandboxConfigError for an unknown backend or template."""
    if config.backend == "bwrap":
        return BwrapSandbox(config.bwrap, config.run_as, config.readonly_paths)
    if config.backend == "command":
        return CommandSandbox(config.template, config.image, config.pass_env)
    raise SandboxConfigError(f"sandbox backend {config.backend!r}: not one of {BACKENDS}")


def check_backend(config: SandboxConfig) -> None:
    """What a worker calls at start: raises SandboxConfigError, with the reason, unless
    the configured sandbox can run here (its program installed, a trial run passing).
    A `command` template that takes `{image}`, with no image configured (each task names
    its own), is checked without a trial run: its words, and its program installed."""
    if config.backend == "command" and not config.image and "{image}" in config.template:
        CommandSandbox(config.template, EACH_TASKS_IMAGE, config.pass_env).check_program()
        return
    make_sandbox(config).check()
