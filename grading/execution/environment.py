"""How to run a task's code: the rollout format's `task.environment`, read and checked.

A plain dict, as a task carries it:

    {"python": "/opt/envs/task/bin/python",
     "setup": ["python setup.py build_ext --inplace"],
     "test_command": "python -m pytest -rA -p no:cacheprovider {tests}",
     "report": "pytest", "wall_seconds": 300, "memory_mb": 4096}

Only `test_command` is required. `Environment.from_dict` refuses anything else it does
not know, naming the field and the reason, so that a typo is an error and not a default.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grading.sandbox.command import check_image

TESTS = "{tests}"
PYTEST, EXIT_CODE = "pytest", "exit_code"
REPORTS = (PYTEST, EXIT_CODE)

DEFAULT_WALL_SECONDS = 300.0
MAX_WALL_SECONDS = 3600.0
DEFAULT_MEMORY_MB = 4096
MIN_MEMORY_MB = 64
MAX_MEMORY_MB = 64 * 1024
MAX_SETUP_COMMANDS = 20
MAX_COMMAND_CHARS = 4000
FIELDS = ("image", "python", "setup", "test_command", "report", "wall_seconds", "memory_mb")
# The pytest plugin that records a pytest run's outcomes (referee.py), as the runner copies
# it into each run: part of a pytest run's fingerprint, as it decides how the run reads.
REFEREE_SOURCE = Path(__file__).with_name("referee.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Environment:
    """What the tests of one task need.

    - `image`: the container image the `command` sandbox runs them in, an image reference
      (`[registry[:port]/]name[:tag][@digest]`; None: the host's system folders, through `bwrap`).
    - `python`: the interpreter, an absolute path as the sandbox sees it; its folder goes
      first on PATH, so `python` and `pytest` in the commands are its environment's.
    - `setup`: shell lines run in the workdir before the tests, in a run of their own.
    - `test_command`: a shell line with `{tests}`, where the selected tests go, quoted.
    - `report`: how its output reads: `pytest` (per test, from the short summary that
      `-rA` prints) or `exit_code` (one answer for the whole command).
    - `wall_seconds`, `memory_mb`: the limits of each run (setup and tests alike).
    """

    test_command: str
    image: str | None = None
    python: str | None = None
    setup: tuple[str, ...] = ()
    report: str = EXIT_CODE
    wall_seconds: float = DEFAULT_WALL_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def from_dict(cls, data: object) -> Environment:
        """The environment `data` describes; ValueError naming the field and the reason."""
        if not isinstance(data, dict):
            raise ValueError(f"environment: must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise ValueError(f"environment.{unknown[0]}: unknown field (known: {', '.join(FIELDS)})")
        if "test_command" not in data:
            raise ValueError("environment.test_command: required")
        setup = data.get("setup", [])
        if not isinstance(setup, list):
            raise ValueError(f"environment.setup: must be a list of commands, got {type(setup).__name__}")
        wall_seconds = data.get("wall_seconds", DEFAULT_WALL_SECONDS)
        if isinstance(wall_seconds, bool) or not isinstance(wall_seconds, int | float):
            raise ValueError(f"environment.wall_seconds: must be a number, got "
                             f"{type(wall_seconds).__name__}")
        memory_mb = data.get("memory_mb", DEFAULT_MEMORY_MB)
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, int):
            raise ValueError(f"environment.memory_mb: must be a whole number, got {memory_mb!r}")
        return cls(test_command=data["test_command"], image=data.get("image"),
                   python=data.get("python"), setup=tuple(setup),
                   report=data.get("report", EXIT_CODE), wall_seconds=float(wall_seconds),
                   memory_mb=memory_mb)

    def to_dict(self) -> dict:
        return {"image": self.image, "python": self.python, "setup": list(self.setup),
                "test_command": self.test_command, "report": self.report,
                "wall_seconds": self.wall_seconds, "memory_mb": self.memory_mb}

    @property
    def fingerprint(self) -> str:
        """A digest of everything here that can change a run's outcome, and of the referee
        that reads a pytest run: part of its cache key."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        if self.report == PYTEST:
            text += REFEREE_SOURCE
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb * 1024**2

    def setup_script(self) -> str | None:
        """The shell script of the setup run, stopping at the first failing line; None
        when there is nothing to set up."""
        if not self.setup:
            return None
        return "\n".join([*self._preamble(), *self.setup])

    def test_script(self, tests: Sequence[str], *, referee: str | None = None) -> str:
        """The shell script of the test run, `tests` quoted into `{tests}`. `referee`: the
        folder of the run's copy that holds the referee plugin, module of the same name
        (`reports.seat_referee`): pytest loads it from PYTEST_PLUGINS, before any conftest
        or tested module, whatever the codebase's configuration says. A command that sets
        PYTHONPATH or PYTEST_PLUGINS itself must keep what they hold."""
        selection = " ".join(shlex.quote(test) for test in tests)
        lines = self._preamble()
        if referee is not None:
            folder = shlex.quote(referee)
            lines.append(f'PYTEST_PLUGINS={folder}"${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"; '
                         f'PYTHONPATH="$PWD"/{folder}"${{PYTHONPATH:+:$PYTHONPATH}}"; '
                         "export PYTEST_PLUGINS PYTHONPATH")
        return "\n".join([*lines, self.test_command.replace(TESTS, selection)])

    def _preamble(self) -> list[str]:
        lines = ["set -e"]
        if self.python:
            folder = posixpath.dirname(self.python)
            lines.append(f'PATH={shlex.quote(folder)}:"$PATH"; export PATH')
        return lines


def _check(env: Environment) -> None:
    _text("test_command", env.test_command)
    if TESTS not in env.test_command:
        raise ValueError(f"environment.test_command: has no {TESTS} placeholder, where the "
                         "selected tests go (without it every run would run the same tests)")
    if env.image is not None:
        _text("image", env.image)
        try:
            check_image(env.image)
        except ValueError as error:
            raise ValueError(f"environment.image: {error}") from None
    if env.python is not None:
        _text("python", env.python)
        if not env.python.startswith("/"):
            raise ValueError(f"environment.python: must be an absolute path, got {env.python!r}")
    if len(env.setup) > MAX_SETUP_COMMANDS:
        raise ValueError(f"environment.setup: {len(env.setup)} commands, over the limit of "
                         f"{MAX_SETUP_COMMANDS}")
    for index, line in enumerate(env.setup):
        _text(f"setup[{index}]", line)
    if env.report not in REPORTS:
        raise ValueError(f"environment.report: {env.report!r} is not one of {', '.join(REPORTS)}")
    if env.report == PYTEST and "-rA" not in _words(env.test_command):
        raise ValueError("environment.test_command: report 'pytest' reads the short summary "
                         "that pytest prints with -rA: add -rA to the command")
    if not (math.isfinite(env.wall_seconds) and 0 < env.wall_seconds <= MAX_WALL_SECONDS):
        raise ValueError(f"environment.wall_seconds: must be above 0 and at most "
                         f"{MAX_WALL_SECONDS:g}, got {env.wall_seconds}")
    if not MIN_MEMORY_MB <= env.memory_mb <= MAX_MEMORY_MB:
        raise ValueError(f"environment.memory_mb: must be between {MIN_MEMORY_MB} and "
                         f"{MAX_MEMORY_MB}, got {env.memory_mb}")


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as error:
        raise ValueError(f"environment.test_command: {error}") from None


def _text(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"environment.{field}: must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"environment.{field}: must not be empty")
    if len(value) > MAX_COMMAND_CHARS:
        raise ValueError(f"environment.{field}: {len(value)} characters, over the limit of "
                         f"{MAX_COMMAND_CHARS}")
    if "\x00" in value:
        raise ValueError(f"environment.{field}: contains a NUL character")
