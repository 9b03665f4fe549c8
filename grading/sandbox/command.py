"""The `command` backend: a deployment's own command line, for tasks that live in images.

The template is split as a shell would split it, then each word is filled in: `{command}`,
a word of its own, becomes the command's arguments; `{workdir}`, `{image}` and the limits
(`{memory_bytes}`, `{max_processes}`, `{file_bytes}`, `{tmp_bytes}`, `{wall_seconds}`,
`{output_bytes}`) fill in where they stand. No shell runs on the host. For example

    docker run --rm --network none --memory {memory_bytes} --pids-limit {max_processes}
        -v {workdir}:/work -w /work {image} {command}

The sandbox watches the wall clock and the output, and kills the template's process
group at a limit; memory, processes and the network are the runtime's to bound.

The image comes from whoever uploads a task: it must be an image reference, so that it
can never read as one of the runtime's options (`--privileged`). The runtime gets none of
the worker's environment but PATH, HOME and the names the deployment lists (`pass_env`:
DOCKER_HOST...), so the worker's secrets never reach it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import string
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grading.sandbox.errors import SandboxConfigError
from grading.sandbox.limits import ERROR, FAILED, PASSED, Limits, RunResult
from grading.sandbox.started import announced, reached
from grading.sandbox.supervise import supervise

COMMAND = "{command}"
FIELDS = {"workdir", "image"} | {field.name for field in dataclasses.fields(Limits)}
ALWAYS_PASSED = ("PATH", "HOME")

# The OCI (docker) image reference, as github.com/distribution/reference reads it:
# [registry[:port]/]name[:tag][@digest], the name's components lowercase.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
MAX_IMAGE_NAME = 255
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_image(image: str) -> None:
    """Raise ValueError, with the reason, unless `image` is an image reference."""
    match = IMAGE_REFERENCE.fullmatch(image)
    if match is None:
        raise ValueError(f"{image!r} is not an image reference "
                         "([registry[:port]/]name[:tag][@digest], the name lowercase)")
    if len(match["name"]) > MAX_IMAGE_NAME:
        raise ValueError(f"{image!r}: its name is longer than {MAX_IMAGE_NAME} characters")


@dataclass(frozen=True)
class CommandSandbox:
    """`template`: the command line, as above; `image`: what `{image}` stands for, an image
    reference; `pass_env`: the names of the worker's environment variables the template's
    program gets besides PATH and HOME. Raises SandboxConfigError when the template has no
    `{command}` word, names a field not in FIELDS, or uses `{image}` with no image given,
    when the image is not an image reference, or a name is not a variable's."""

    template: str
    image: str = ""
    pass_env: tuple[str, ...] = ()

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
        if self.image:
            try:
                check_image(self.image)
            except ValueError as error:
                raise SandboxConfigError(f"sandbox image: {error}") from None
        for name in self.pass_env:
            if not _ENV_NAME.fullmatch(name):
                raise SandboxConfigError(f"sandbox environment: {name!r} is not the name of "
                                         "an environment variable")

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
        """Raise SandboxConfigError unless the template's program is installed and every
        name of `pass_env` is set in the worker's environment."""
        program = shlex.split(self.template)[0]
        if shutil.which(program) is None:
            raise SandboxConfigError(f"sandbox template: {program!r} is not installed")
        missing = [name for name in self.pass_env if name not in os.environ]
        if missing:
            raise SandboxConfigError(f"sandbox environment: {', '.join(missing)} to pass to the "
                                     "runtime, but not set in the worker's environment")

    def run(self, workdir: Path, command: list[str] | str, limits: Limits) -> RunResult:
        """Run `command` (an argument list, or a line for `sh -c`) through the template,
        whose program gets PATH, HOME and the `pass_env` variables of the worker's
        environment, and nothing else of it."""
        argv = self.argv(workdir, command, limits)
        env = {name: os.environ[name] for name in (*ALWAYS_PASSED, *self.pass_env)
               if name in os.environ}
        started = time.monotonic()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True)
        status, exit_code, output = supervise(process, limits, started=started,
                                              memory_in_use=None)
        started_command, output = reached(output)
        if not started_command and status in (PASSED, FAILED):  # a runtime that could not start it
            return RunResult(ERROR, None, time.monotonic() - started,
                             f"the runtime exited with {exit_code} before the command ran: {output}",
                             shlex.join(argv))
        return RunResult(status, exit_code, time.monotonic() - started, output,
                         shlex.join(argv))

    def argv(self, workdir: Path, command: list[str] | str, limits: Limits) -> list[str]:
        """The host command line of one run."""
        values = {**dataclasses.asdict(limits), "workdir": str(workdir), "image": self.image}
        command_words = announced(command if isinstance(command, list) else ["sh", "-c", command])
        argv: list[str] = []
        for word in shlex.split(self.template):
            argv += command_words if word == COMMAND else [word.format(**values)]
        return argv
