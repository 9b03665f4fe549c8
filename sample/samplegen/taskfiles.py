"""Reads sample/sample.toml, the code base and the task files (sample/tasks/*.toml).

Where a task file takes text, it gives a string, `@name` for one of the task's
`[snippets]`, or `{ codebase = "path", lines = [first, last] }` for lines of a file of
the code base, so that nothing is written twice and the code base is never copied.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from .replay import Run, Sample, Task

SKIP_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
TASK_KEYS = {"id", "agent", "task_on_every_line", "passed_field", "statement", "tests", "extra_fields"}
TASK_KEYS |= {"snippets", "reference", "runs"}
RUN_KEYS = {"id", "variant", "quality", "meta", "steps", "evaluation"}
STEPS = ("grep", "view", "bash", "edit", "failed_edit", "create", "write_file", "rm", "restore", "sed", "pytest")


def load_codebase(root: Path) -> dict[str, str]:
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or SKIP_PARTS.intersection(rel.parts) or path.suffix == ".pyc":
            continue
        text = path.read_text(encoding="utf-8")
        if not text.endswith("\n"):
            raise SystemExit(f"{rel}: sample code base files must end with a newline")
        files[rel.as_posix()] = text
    return files


def load_sample(here: Path) -> Sample:
    settings = tomllib.loads((here / "sample.toml").read_text(encoding="utf-8"))
    return Sample(**settings, codebase=load_codebase(here / "codebase"))


class Texts:
    """Resolves the text values of one task file. A snippet's own value is not looked up
    again, so a snippet can hold a text that starts with `@`."""

    def __init__(self, codebase: dict[str, str], snippets: dict, where: str):
        self.codebase, self.where = codebase, where
        self.snippets = {name: self.lines(v) if isinstance(v, dict) else v for name, v in snippets.items()}

    def lines(self, ref: dict) -> str:
        if set(ref) != {"codebase", "lines"} or ref["codebase"] not in self.codebase:
            raise SystemExit(f"{self.where}: not a file of the code base and its lines: {ref}")
        first, last = ref["lines"]
        lines = self.codebase[ref["codebase"]].splitlines(keepends=True)
        if not 1 <= first <= last <= len(lines):
            raise SystemExit(f"{self.where}: {ref['codebase']} has no lines {first} to {last}")
        return "".join(lines[first - 1 : last])

    def __call__(self, value):
        if isinstance(value, str) and value.startswith("@"):
            if value[1:] not in self.snippets:
                raise SystemExit(f"{self.where}: no snippet named {value[1:]!r}")
            return self.snippets[value[1:]]
        if isinstance(value, dict):
            return self.lines(value) if "codebase" in value else {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(item) for item in value]
        return value


def require_known(table: dict, known: set[str], where: str) -> None:
    """A misspelt optional key would otherwise be ignored without a word."""
    if unknown := set(table) - known:
        raise SystemExit(f"{where}: unknown keys {sorted(unknown)}")


def play(run: Run, step: dict) -> None:
    """Append one step of a task file's run to the trajectory."""
    if "finish" in step:
        require_known(step, {"finish"}, f"{run.task.id}/{run.tid}")
        run.finish(step["finish"])
        return
    tools = [name for name in STEPS if name in step]
    if len(tools) != 1:
        raise SystemExit(f"{run.task.id}/{run.tid}: a step names one of {STEPS}, not {tools}")
    thought, target = step.pop("thought", None), step.pop(tools[0])
    getattr(run, tools[0])(thought, target, **step)


def load_task(sample: Sample, path: Path, *, runs_code: bool = False) -> Task:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    require_known(data, TASK_KEYS, path.name)
    texts = Texts(sample.codebase, data.get("snippets", {}), where=path.name)
    tests = data["tests"]
    require_known(tests, {"fail_to_pass", "pass_to_pass", "hidden"}, path.name)
    for edit in data["reference"]:
        require_known(edit, {"edit", "old", "new"}, f"{path.name}: reference")
    task = Task(
        sample=sample,
        id=data["id"],
        agent=data["agent"],
        statement=data["statement"],
        reference=[(e["edit"], e["old"], e["new"]) for e in texts(data["reference"])],
        hidden_tests=tests["hidden"],
        fail_to_pass=tests["fail_to_pass"],
        pass_to_pass=tests["pass_to_pass"],
        task_on_every_line=data["task_on_every_line"],
        passed_field=data.get("passed_field", False),
        extra_fields=data.get("extra_fields", {}),
        runs_code=runs_code,
    )
    for spec in data["runs"]:
        require_known(spec, RUN_KEYS, f"{path.name}: run {spec['id']}")
        run = Run(task, spec["id"], spec["variant"], spec.get("quality"), spec.get("meta", {}))
        for index, step in enumerate(texts(spec["steps"]), 1):
            try:
                play(run, step)
            except Exception as error:
                error.add_note(f"in {path.name}, run {run.tid}, step {index}")
                raise
        run.evaluate(**texts(spec["evaluation"]))
        task.runs.append(run)
    return task


def load_tasks(here: Path, folder: str = "tasks") -> list[Task]:
    """The task files of `folder`: `tasks/`, or `evidence/`, whose records say how to run their code."""
    sample = load_sample(here)
    return [load_task(sample, path, runs_code=folder == "evidence")
            for path in sorted((here / folder).glob("*.toml"))]
