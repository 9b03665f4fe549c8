"""The workspace's code tools: `view_file`, `run_tests` and `run` on a candidate's code, and
`run_all`, one command on every passing candidate's code and the task's reference fix's.

They read and run the code of the group's `CodeAccess` (grading/code_access.py): each
candidate's tree as its patch left it, and for each run a fresh copy of it, so what
`view_file` shows is never what a run changed.

`CodeTools` are the code tools of one grading conversation, within its caps' code budget
(`Caps.code_runs` calls that run code, `Caps.code_seconds` seconds of sandbox time, setup
included: a `run_all` is one call, its runs' seconds all counted). The grader makes one per
conversation and hands it to the Workspace, which resolves labels.
Patches are applied, never run, on the host; everything a candidate's code does runs in
the sandbox, with the environment's memory limit and no network.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from grading.cases import TrajectoryCase
from grading.code_access import CodeAccess
from grading.execution.environment import PYTEST
from grading.execution.matrix import PASS
from grading.execution.plan import REFERENCE
from grading.execution.reports import Refereed, read_referee, seat_referee
from grading.sandbox import Limits, PatchRefused, RunResult
from grading.sandbox import limits as sandbox_status
from grading.tool_limits import (
    MAX_ARGUMENT_CHARS,
    Caps,
    ToolError,
    brief,
    cap,
    number_argument,
    text_argument,
)

RUN_OUTPUT_BYTES = 1024 * 1024  # a run printing more is killed: the agent sees a tail anyway
BINARY_SNIFF_BYTES = 8192
REFERENCE_LABEL = "reference"  # how run_all names the task's reference fix; no trajectory's label
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")  # an object's address differs from run to run


class CodeTools:
    """`view_file`, `run_tests`, `run` and `run_all` for one conversation over `access`, within
    `caps`."""

    def __init__(self, access: CodeAccess, caps: Caps):
        self.access = access
        self.caps = caps
        self.runs_left = caps.code_runs
        self.seconds_left = float(caps.code_seconds)

    def view_file(self, label: str, trajectory: TrajectoryCase, path: str, start: int = 1,
                  end: int = 0) -> str:
        """Lines `start`..`end` (1-based, inclusive; `end` 0: as many as one call shows) of a
        file of the candidate's code, or the entries of a folder ("" is the root)."""
        path = text_argument("path", path)
        start, end = number_argument("start", start), number_argument("end", end)
        target = inside(self._tree(label, trajectory), path)
        try:
            return self._show(label, target, path.strip("/") or ".", start, end)
        except OSError as error:  # a name too long for the file system, a file it cannot open...
            raise ToolError(f"{label}'s code cannot be read at {brief(path)}: "
                            f"{error.strerror or error}") from None

    def run_tests(self, label: str, trajectory: TrajectoryCase, tests: Sequence[str]) -> str:
        """The environment's test command on the candidate's code, `tests` (ids or files,
        shell-quoted) in its `{tests}`."""
        if not isinstance(tests, list):
            raise ToolError(f"tests must be a list of test ids or files, not {brief(tests)}")
        tests = [text_argument("a test", test) for test in tests]
        if not tests or not all(test.strip() for test in tests):
            raise ToolError("run_tests needs at least one test id or test file, none blank")
        if sum(len(test) + 1 for test in tests) > MAX_ARGUMENT_CHARS:  # one line of the script
            raise ToolError(f"{len(tests)} tests are too many for one run: name at most "
                            f"{MAX_ARGUMENT_CHARS} characters of tests")
        environment = self.access.environment
        return self._run(label, trajectory, lambda referee: environment.test_script(tests, referee=referee),
                         f"run_tests {' '.join(tests)}", refereed=environment.report == PYTEST)

    def run(self, label: str, trajectory: TrajectoryCase, command: str) -> str:
        """A shell command on the candidate's code, in the sandbox, without network."""
        if not text_argument("command", command).strip():
            raise ToolError("run needs a command")
        # A setup script of one line is the command behind the environment's own preamble
        # (set -e, its interpreter first on PATH), as its tests run.
        script = replace(self.access.environment, setup=(command,)).setup_script()
        return self._run(label, trajectory, lambda referee: script, f"run {command}", refereed=False)

    def run_all(self, candidates: Sequence[tuple[str, TrajectoryCase]], command: str) -> str:
        """A shell command on the reference fix's code (when the task has one) and on each of
        `candidates` (label, trajectory), in the sandbox: a model's own differential test. One
        call of the budget, every run's seconds counted; the outcomes grouped by how each run
        ended and what it printed (addresses aside), the reference's first."""
        if not text_argument("command", command).strip():
            raise ToolError("run_all needs a command")
        self._check_budget()
        self.runs_left -= 1
        script = replace(self.access.environment, setup=(command,)).setup_script()
        subjects = [(label, trajectory.patch or "", trajectory.trajectory_id) for label, trajectory in candidates]
        if self.access.reference_patch:
            subjects.insert(0, (REFERENCE_LABEL, self.access.reference_patch, REFERENCE))
        groups: dict[tuple, list[str]] = {}
        shown: dict[tuple, tuple[str, RunResult]] = {}
        apart, not_run = [], []
        for label, patch, key in subjects:
            if self.seconds_left <= 0 or self.access.time_left() <= 0:
                not_run.append(label)
                continue
            try:
                tree = self.access.tree(key, patch)
            except PatchRefused as refused:
                apart.append(f"{label}: its patch cannot be applied to the codebase ({refused}); not run")
                continue
            outcome, result, _ = self._execute(tree, lambda referee: script, refereed=False, patch=patch)
            same = (result.status, result.exit_code, _ADDRESS.sub("0x?", result.output))
            groups.setdefault(same, []).append(label)
            shown.setdefault(same, (outcome, result))
        lines = [f"run_all {command}: {len(subjects) - len(not_run) - len(apart)} run(s) in "
                 f"{len(groups)} distinct outcome(s)",
                 f"[code budget left: {self.runs_left} run(s), {max(self.seconds_left, 0):.1f} s]"]
        if not self.access.reference_patch:
            lines.append("(the task has no reference fix: the candidates alone)")
        tail = max(200, self.caps.log_chars // max(1, len(groups)))
        for same, labels in groups.items():
            outcome, result = shown[same]
            output = result.output[-tail:]
            cut = (f", the last {len(output)} of {len(result.output)} characters"
                   if len(output) < len(result.output) else "")
            lines.append(f"{', '.join(labels)}: {outcome}")
            lines.append(f"  output{cut}:\n{output}" if result.output else "  output: (none)")
        lines += apart
        if not_run:
            lines.append(f"not run, the code budget's or the worker's time spent: {', '.join(not_run)}")
        return cap("\n".join(lines), self.caps.output_chars, "the outputs' ends are shown")

    # --- internals -----------------------------------------------------------------------

    def _show(self, label: str, target: Path, shown: str, start: int, end: int) -> str:
        if target.is_dir():
            entries = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in target.iterdir())
            body = f"=== {label}: {shown}/ ({len(entries)} entries) ===\n" + "\n".join(entries)
            return cap(body, self.caps.output_chars, "view a subfolder to see fewer entries")
        if not target.is_file():
            raise ToolError(f"{label}'s code has no file {brief(shown)}; view_file with a folder lists it")
        with target.open("rb") as f:
            if b"\0" in f.read(BINARY_SNIFF_BYTES):
                return f"{label}: {shown} is a binary file of {target.stat().st_size} bytes; not shown"
        start = max(1, start)
        last = start + self.caps.file_lines - 1
        end = last if end < 1 else min(end, last)
        lines, total = [], 0
        with target.open(encoding="utf-8", errors="replace", newline="") as f:
            for total, line in enumerate(f, start=1):
                if total > end:
                    break
                if total >= start:
                    text = line.rstrip("\r\n")
                    lines.append(f"{total:>5} {text}")
        if not lines:
            return f"{label}: {shown} has {total} line(s), none from line {start}"
        head = f"=== {label}: {shown}, lines {start}..{start + len(lines) - 1} ==="
        note = [f"[more lines follow: view_file from {start + len(lines)}]"] if total > end else []
        return cap("\n".join([head, *lines, *note]), self.caps.output_chars,
                   "ask for fewer lines")

    def _tree(self, label: str, trajectory: TrajectoryCase) -> Path:
        try:
            return self.access.tree(trajectory.trajectory_id, trajectory.patch or "")
        except PatchRefused as refused:
            raise ToolError(f"{label}'s patch cannot be applied to the codebase ({refused}): "
                            "its code cannot be read or run") from None

    def _run(self, label: str, trajectory: TrajectoryCase, script: Callable[[str | None], str], title: str, *,
             refereed: bool) -> str:
        """`script(referee)`: the script to run, given the referee's folder when `refereed` (a
        pytest run, read from the referee's record as the evidence pass reads it, not from what
        the candidate's code prints: grading/execution/reports.py), else None."""
        self._check_budget()
        tree = self._tree(label, trajectory)
        self.runs_left -= 1
        outcome, result, record = self._execute(tree, script, refereed=refereed, patch=trajectory.patch or "")
        return self._report(label, f"{title}: {outcome}", result, record)

    def _check_budget(self) -> None:
        """ToolError, nothing run, when the budget or the worker's time is spent."""
        if self.runs_left < 1:
            raise ToolError(f"the code budget is spent: {self.caps.code_runs} run(s) of "
                            f"{self.caps.code_runs} used; nothing was run")
        if self.seconds_left <= 0:
            raise ToolError(f"the code budget is spent: its {self.caps.code_seconds:g} s are used; "
                            "nothing was run")
        if self.access.time_left() <= 0:
            raise ToolError("the worker's time for running code in this task is spent; nothing was run")

    def _execute(self, tree: Path, script: Callable[[str | None], str], *, refereed: bool,
                 patch: str) -> tuple[str, RunResult, Refereed | None]:
        """One run on a fresh copy of `tree`, the environment's setup first: what its status
        means, its result, and the referee's record of a refereed run."""
        environment = self.access.environment
        with self.access.copy(tree) as workdir:
            setup = environment.setup_script()
            if setup is not None:
                result, outcome = self._sandboxed(workdir, setup)
                if result.status != sandbox_status.PASSED:
                    return f"the environment's setup {outcome}", result, None
            referee = seat_referee(workdir) if refereed else None
            result, outcome = self._sandboxed(workdir, script(referee))
            record = read_referee(workdir / referee, result, patch) if referee else None
        return outcome, result, record

    def _sandboxed(self, workdir: Path, script: str) -> tuple[RunResult, str]:
        """One sandboxed run, its wall clock the least of the environment's limit, the budget's
        time left and the worker's; the result and what its status means."""
        environment = self.access.environment
        wall, limit = min((environment.wall_seconds, "the environment's time limit per run"),
                          (self.seconds_left, "the time left in the code budget"),
                          (self.access.time_left(), "the worker's time left for code in this task"))
        result = self.access.sandbox.run(workdir, script, Limits(
            wall_seconds=wall, memory_bytes=environment.memory_bytes, output_bytes=RUN_OUTPUT_BYTES))
        self.seconds_left -= result.duration
        return result, self._outcome(result, f"cut at {wall:.1f} s, {limit}")

    def _outcome(self, result: RunResult, cut: str) -> str:
        status = result.status
        if status == sandbox_status.PASSED:
            return f"passed in {result.duration:.1f} s"
        if status == sandbox_status.FAILED:
            return f"failed (exit code {result.exit_code}) in {result.duration:.1f} s"
        if status == sandbox_status.TIMEOUT:
            return cut
        if status == sandbox_status.KILLED_OUTPUT:
            return f"killed: its output passed {RUN_OUTPUT_BYTES // 1024} KiB"
        if status == sandbox_status.KILLED_MEMORY:
            return f"killed at the environment's memory limit ({self.access.environment.memory_mb} MiB)"
        return "not run: the sandbox could not start it"

    def _report(self, label: str, headline: str, result: RunResult, record: Refereed | None) -> str:
        lines = [f"{label}: {headline}",
                 f"[code budget left: {self.runs_left} run(s), {max(self.seconds_left, 0):.1f} s]"]
        if record is not None:
            lines += [f"tampers with the test runner: {what}" for what in record.tampering]
            outcomes = dict(record.tests)
            counts = Counter(outcomes.values())
            lines.append("tests: " + (", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
                                      or "no per-test results in the output"))
            not_passing_first = sorted(outcomes.items(), key=lambda item: (item[1] == PASS, item[0]))
            lines += [f"  {status} {test}" for test, status in not_passing_first[: self.caps.test_names]]
            if len(outcomes) > self.caps.test_names:
                lines.append(f"  ... [{len(outcomes) - self.caps.test_names} more not shown]")
        output = result.output
        tail = output[-self.caps.log_chars:]
        cut = f", the last {len(tail)} of {len(output)} characters" if len(tail) < len(output) else ""
        lines.append(f"output{cut}:\n{tail}" if output else "output: (none)")
        return cap("\n".join(lines), self.caps.output_chars, "the output's end is shown")


def inside(tree: Path, path: str) -> Path:
    """`path` (relative to `tree`'s root) in `tree`; ToolError when it is absolute, has a `..`
    segment or leads through a symlink out of the tree."""
    name = PurePosixPath(path)
    if name.is_absolute():
        raise ToolError(f"{brief(path)} is absolute: paths are relative to the codebase's root")
    if ".." in name.parts:
        raise ToolError(f"{brief(path)}: '..' leads out of the codebase")
    try:
        target = (tree / name).resolve()
    except RuntimeError:  # Python before 3.13 raises it for a loop of symlinks (a patch can make one)
        raise ToolError(f"{brief(path)} leads into a loop of symlinks") from None
    if not target.is_relative_to(tree.resolve()):
        raise ToolError(f"{brief(path)} leads through a symlink out of the codebase")
    return target
