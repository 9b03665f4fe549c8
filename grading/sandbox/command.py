"""The `command` backend: a deployment's own command line, for tasks that live in images.

The template is split as a shell would split it, then each word is filled in: `{command}`,
a word of its own, becomes the command's arguments; `{workdir}`, `{image}` and the limits
(`{memory_bytes}`, `{max_processes}`, `{file_bytes}`, `{tmp_bytes}`, `{wall_seconds}`,
`{output_bytes}`) fill in where they stand. No shell runs on the host. For example

    docker run --rm --network none --memory {memory_bytes} --pids-limit {max_processes}
        -v {workdir}:/work -w /work {image} {command}

The sandbox watches the wall clock and the output, and kills the template's process
group at a limit; memory, processes and the network are the runtime's to bound.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import string
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grading.sandbox.errors import SandboxConfigError
from grading.sandbox.limits import PASSED, Limits, RunResult
from grading.sandbox.supervise import supervise

COMMAND = "{command}"
FIELDS = {"workdir", "image"} | {field.name for field in dataclasses.fields(Limits)}


@dataclass(frozen=True)
class CommandSandbox:
    """`template`: the command line, as above; `image`: what `{image}` stands for.
    Raises SandboxConfigError when the template has no `{command}` word, names a field
    not in FIELDS, or uses `{image}` with no image given."""

    template: str
    image: str = ""

    def __post_init__(self) -> None:
        words = shlex.split(self.template)
        if COMMAND not in words:
            raise SandboxConfigError(f"sandbox template {self.template!r}: no {COMMAND} word")
        fields = {name for word in words if word != COMMAND
                  for _, name, _, _ in string.Formatter().parse(word) if name is not None}
        if fields - FIELDS:
            raise SandboxConfigError(f"sandbox template {self.template!r}: unknown fields "
                                     f"{sorted(fields - FIELDS)} (known: {sorted(FIELDS)})")
        if "image" in fields and not self.image:
            raise SandboxConfigError(f"sandbox template {self.template!r} uses {{image}}: "
                                     "no image given")

    def check(self) -> None:
        """Raise SandboxConfigError unless the template's program is installed and runs
        `true` (a container runtime with no daemon fails here, not at the first run)."""
        self.check_program()
        with tempfile.TemporaryDirectory() as workdir:
            trial = self.run(Path(workdir), ["true"], Limits(wall_seconds=120))
        if trial.status != PASSED:
            raise SandboxConfigError(f"sandbox template cannot run `true` ({trial.status}): "
                                     f"{trial.output.strip()}\n{trial.command}")

    def check_program(self) -> None:
        """Raise SandboxConfigError unless the template's program is installed."""
        program = shlex.split(self.template)[0]
        if shutil.which(program) is None:
            raise SandboxConfigError(f"sandbox template: {program!r} is not installed")

    def run(self, workdir: Path, command: list[str] | str, limits: Limits) -> RunResult:
        """Run `command` (an argument list, or a line for `sh -c`) through the template,
        with the worker's environment (the runtime may need it: the template decides what
        reaches the command)."""
        argv = self.argv(workdir, command, limits)
        started = time.monotonic()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=os.environ,
                                   start_new_session=True)
        status, exit_code, output = supervise(process, limits, started=started,
                                              memory_in_use=None)
        return RunResult(status, exit_code, time.monotonic() - started, output,
                         shlex.join(argv))

    def argv(self, workdir: Path, command: list[str] | str, limits: Limits) -> list[str]:
        """The host command line of one run."""
        values = {**dataclasses.asdict(limits), "workdir": str(workdir), "image": self.image}
        command_words = command if isinstance(command, list) else ["sh", "-c", command]
        argv: list[str] = []
        for word in shlex.split(self.template):
            argv += command_words if word == COMMAND else [word.format(**values)]
        return argv
