"""What one run may use, and what came of it.

A run's status is one of STATUSES: `passed` and `failed` are the command's own answer
(its exit code, zero or not); `timeout`, `killed_output` and `killed_memory` mean the
sandbox killed it at a limit; `error` means the sandbox could not start the command at
all (the output says why). A kernel refusal (a fork past `max_processes`, a write past
`file_bytes`, a connection with no network) is what the command sees, not a status: the
command fails, or runs on until the wall clock stops it.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSED = "passed"
FAILED = "failed"
TIMEOUT = "timeout"
KILLED_OUTPUT = "killed_output"
KILLED_MEMORY = "killed_memory"
ERROR = "error"
STATUSES = (PASSED, FAILED, TIMEOUT, KILLED_OUTPUT, KILLED_MEMORY, ERROR)

MiB = 1024**2


@dataclass(frozen=True)
class Limits:
    """The limits of one run.

    - `wall_seconds`: wall-clock time, then the run is killed (`timeout`).
    - `memory_bytes`: resident memory of all the run's processes together, polled, then
      killed (`killed_memory`). Watched by the `bwrap` backend; a `command` template
      passes it to its runtime (`{memory_bytes}`).
    - `max_processes`: processes and threads at once; a fork past it fails.
    - `output_bytes`: stdout and stderr together, then killed (`killed_output`).
    - `file_bytes`: the largest file the run may write; a longer write fails.
    - `tmp_bytes`: the size of its private /tmp (a memory-backed filesystem).
    """

    wall_seconds: float = 600.0
    memory_bytes: int = 4096 * MiB
    max_processes: int = 256
    output_bytes: int = 64 * MiB
    file_bytes: int = 1024 * MiB
    tmp_bytes: int = 512 * MiB


@dataclass(frozen=True)
class RunResult:
    """One run: its status (one of STATUSES), the command's exit code (negative: killed by
    that signal; None when the sandbox did not start it), the wall-clock seconds, its
    output (stdout and stderr interleaved, only the head and the tail when long) and
    `command`, the host command line that runs it again the same way."""

    status: str
    exit_code: int | None
    duration: float
    output: str
    command: str
