"""A trajectory replayed as tool calls over a copy of the code base, and the line it becomes."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from .diffs import apply_edits, make_patch, replace_once
from .pytest_output import Failure, duration, pytest_quiet, sep, summary_line

# The tool schemas go with every request, so they count towards every turn's input.
TOOL_SCHEMA_CHARS = 3400
# Output tokens also pay for the reasoning that a transcript does not show.
REASONING_TOKENS_PER_TURN = 160


@dataclass(frozen=True)
class Sample:
    """What every task shares: sample/sample.toml and the code base."""

    repo: str
    base_commit: str
    workdir: str
    system_prompt: str
    user_prompt: str  # a str.format template
    codebase: dict[str, str]
    # How the evidence tasks' code runs (sample.toml's [execution]): the snapshot and environment
    # their task records name, rollout format v2.
    execution: dict = field(default_factory=dict)


@dataclass
class Task:
    sample: Sample
    id: str
    agent: str
    statement: str
    reference: list[tuple[str, str, str]]
    hidden_tests: dict[str, str]  # test file -> code the evaluation appends to it
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    task_on_every_line: bool
    passed_field: bool
    extra_fields: dict
    runs: list[Run] = field(default_factory=list)
    runs_code: bool = False  # its record says how to run its code (sample/evidence/)

    @property
    def test_ids(self) -> list[str]:
        return self.fail_to_pass + self.pass_to_pass

    def task_record(self) -> dict:
        base = self.sample.codebase
        return {
            "id": self.id,
            "statement": self.statement,
            "repo": self.sample.repo,
            "base_commit": self.sample.base_commit,
            "reference_patch": make_patch(base, apply_edits(base, self.reference)),
            **(self.execution_record() if self.runs_code else {}),
        }

    def execution_record(self) -> dict:
        """What running the task's code needs: the snapshot, the hidden tests as the test patch the
        reward applies, the reward's tests and the environment."""
        base = self.sample.codebase
        hidden = {**base, **{path: base[path] + code for path, code in self.hidden_tests.items()}}
        return {"snapshot": self.sample.execution["snapshot"], "test_patch": make_patch(base, hidden),
                "reward_tests": self.test_ids, "environment": self.sample.execution["environment"]}

    def user_prompt(self) -> str:
        s = self.sample
        return s.user_prompt.format(
            statement=self.statement.rstrip(), repo=s.repo, workdir=s.workdir, commit=s.base_commit[:7]
        )


@dataclass
class Check:
    """A claim in a transcript that --verify re-runs on a snapshot of the files."""

    kind: str  # "command", "pytest" or "pytest_error"
    files: dict[str, str]
    command: str
    expected: str  # command output, or the pytest output we wrote
    match: str = "exact"  # "exact" or "last_line" (tracebacks differ between Python versions)
    failed: tuple[str, ...] = ()


class Run:
    """One trajectory: each method is a step of a task file's run, and appends its tool call."""

    def __init__(self, task: Task, tid: str, variant: str, quality: int | None, meta: dict):
        self.task, self.tid, self.variant, self.quality, self.meta = task, tid, variant, quality, meta
        self.workdir = task.sample.workdir
        self.files = dict(task.sample.codebase)
        self.messages = [
            {"role": "system", "content": task.sample.system_prompt},
            {"role": "user", "content": task.user_prompt()},
        ]
        self.checks: list[Check] = []
        self.outcome: dict = {}
        self.recorded: dict | None = None

    def _call(self, thought: str | None, name: str, args: dict, output: str) -> None:
        n = sum(1 for m in self.messages if m["role"] == "tool")
        seed = f"{self.task.id}/{self.tid}/{n}".encode()
        call_id = "call_" + hashlib.sha1(seed).hexdigest()[:24]
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        self.messages.append({"role": "assistant", "content": thought, "tool_calls": [call]})
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def _numbered(self, path: str, first: int, last: int) -> str:
        lines = self.files[path].splitlines()
        return "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1))

    def bash(self, thought, command, output, match="exact"):
        if command.startswith("python ") and "pytest" not in command:
            self.checks.append(Check("command", dict(self.files), command, output, match))
        self._call(thought, "bash", {"command": command}, output)

    def grep(self, thought, pattern, under="invoicekit"):
        hits = []
        for path in sorted(self.files):
            if path == under or path.startswith(under.rstrip("/") + "/"):
                for number, line in enumerate(self.files[path].splitlines(), 1):
                    if pattern in line:
                        hits.append(f"{path}:{number}:{line}")
        quoted = pattern.replace('"', '\\"')
        self._call(thought, "bash", {"command": f'grep -rn "{quoted}" {under}'}, "\n".join(hits))

    def view(self, thought, path, lines=None):
        count = len(self.files[path].splitlines())
        first, last = lines if lines else (1, count)
        last = min(last, count)
        args = {"path": f"{self.workdir}/{path}"}
        if (first, last) != (1, count):
            args |= {"start_line": first, "end_line": last}
        self._call(thought, "view_file", args, self._numbered(path, first, last))

    def edit(self, thought, path, old, new):
        text = self.files[path]
        self.files[path] = replace_once(text, old, new, f"{self.task.id}/{self.tid}: {path}")
        start = text[: text.index(old)].count("\n") + 1
        end = start + new.count("\n")
        snippet = self._numbered(path, max(start - 3, 1), min(end + 3, len(self.files[path].splitlines())))
        full = f"{self.workdir}/{path}"
        output = (
            f"The file {full} has been edited. Here's the result of running `cat -n` on a "
            f"snippet of {full}:\n{snippet}\nReview the changes and make sure they are as "
            "expected. Edit the file again if necessary."
        )
        args = {"command": "str_replace", "path": full, "old_str": old, "new_str": new}
        self._call(thought, "str_replace_editor", args, output)

    def failed_edit(self, thought, path, old, new):
        if old in self.files[path]:
            raise SystemExit(f"{self.task.id}/{self.tid}: {path}: this edit would succeed")
        full = f"{self.workdir}/{path}"
        output = f"No replacement was performed, old_str `{old}` did not appear verbatim in {full}."
        args = {"command": "str_replace", "path": full, "old_str": old, "new_str": new}
        self._call(thought, "str_replace_editor", args, output)

    def create(self, thought, path, text):
        self.files[path] = text
        full = f"{self.workdir}/{path}"
        args = {"command": "create", "path": full, "file_text": text}
        self._call(thought, "str_replace_editor", args, f"File created successfully at: {full}")

    def write_file(self, thought, path, replace):
        text = self.files[path]
        for old, new in replace:
            text = replace_once(text, old, new, f"{self.task.id}/{self.tid}: {path}")
        self.files[path] = text
        self._call(thought, "bash", {"command": f"cat > {path} <<'EOF'\n{text}EOF"}, "")

    def rm(self, thought, path):
        del self.files[path]
        self._call(thought, "bash", {"command": f"rm {path}"}, "")

    def restore(self, thought, path):
        self.files[path] = self.task.sample.codebase[path]
        self._call(thought, "bash", {"command": f"git checkout -- {path}"}, "")

    def sed(self, thought, path, old, new):
        self.files[path] = re.sub(rf"\b{re.escape(old)}\b", new, self.files[path])
        self._call(thought, "bash", {"command": f"sed -i 's/\\b{old}\\b/{new}/g' {path}"}, "")

    def pytest(self, thought, target, failures=(), collection_error=None):
        """A pytest run: its output is computed from `failures`, or is the collection error as written."""
        command = f"python -m pytest {target} -q"
        if collection_error is not None:
            self.checks.append(Check("pytest_error", dict(self.files), target, collection_error))
            self._call(thought, "bash", {"command": command}, collection_error)
            return
        failures = [Failure(**failure) for failure in failures]
        output = pytest_quiet(self.files, target, failures, key=f"{self.task.id}/{self.tid}/{len(self.messages)}")
        names = tuple(f.test for f in failures)
        self.checks.append(Check("pytest", dict(self.files), target, output, failed=names))
        self._call(thought, "bash", {"command": command}, output)

    def finish(self, text):
        self.messages.append({"role": "assistant", "content": text})

    def evaluate(self, *, failed=None, collection_error=None, recorded_failed=None):
        """The evaluation: `failed` maps the last part of a test id to its one-line reason.
        `recorded_failed`, in the same form, is what a flaky evaluation recorded instead: the
        line carries it, --verify checks `failed`."""
        if (failed is None) == (collection_error is None):
            raise SystemExit(f"{self.task.id}/{self.tid}: give the evaluation `failed` or `collection_error`")
        self.outcome = {"error": collection_error} if collection_error is not None else {"failed": failed}
        self.recorded = recorded_failed

    def tests_record(self, *, as_recorded: bool = True) -> tuple[float, dict]:
        ids = self.task.test_ids
        if "error" in self.outcome:
            return 0.0, {"passed": [], "failed": list(ids), "log": self.outcome["error"]}
        reasons = self.outcome["failed"]
        if as_recorded and self.recorded is not None:
            reasons = self.recorded
        failed = [i for i in ids if i.split("::")[-1] in reasons]
        passed = [i for i in ids if i not in failed]
        unknown = set(reasons) - {i.split("::")[-1] for i in failed}
        if unknown:
            raise SystemExit(f"{self.task.id}/{self.tid}: no such test ids: {sorted(unknown)}")
        lines = [f"PASSED {i}" for i in passed]
        lines += [summary_line("FAILED", i, reasons[i.split("::")[-1]]) for i in failed]
        counts = ([f"{len(failed)} failed"] if failed else []) + [f"{len(passed)} passed"]
        time = duration(f"eval/{self.task.id}/{self.tid}", 38, 79)
        lines.append(sep("=", f"{', '.join(counts)} in {time}"))
        return (0.0 if failed else 1.0), {"passed": passed, "failed": failed, "log": "\n".join(lines) + "\n"}

    def record(self, with_task: bool) -> dict:
        reward, tests = self.tests_record()
        if (reward == 1.0) != (self.quality is not None):
            raise SystemExit(f"{self.task.id}/{self.tid}: give a quality if and only if the run passes")

        def chars(message: dict) -> int:
            calls = message.get("tool_calls", [])
            return len(message.get("content") or "") + sum(len(c["function"]["arguments"]) for c in calls)

        assistant = [m for m in self.messages if m["role"] == "assistant"]
        in_chars, context = 0, 0
        for message in self.messages:
            if message["role"] == "assistant":
                in_chars += context + TOOL_SCHEMA_CHARS
            context += chars(message)
        record = {
            "group_id": self.task.id,
            "trajectory_id": self.tid,
            "reward": reward,
            "patch": make_patch(self.task.sample.codebase, self.files),
        }
        if self.task.passed_field:
            record["passed"] = reward == 1.0
        if with_task:
            record["task"] = self.task.task_record()
        record |= self.task.extra_fields
        record["messages"] = self.messages
        record["tests"] = tests
        record["metrics"] = {
            "num_turns": len(assistant),
            "output_tokens": sum(map(chars, assistant)) // 4 + REASONING_TOKENS_PER_TURN * len(assistant),
            "input_tokens": in_chars // 4,
        }
        record["meta"] = {"variant": self.variant, "expected_quality": self.quality, "agent": self.task.agent}
        record["meta"] |= self.meta
        return record
