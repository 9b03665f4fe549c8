"""pytest's terminal output for the runs a transcript shows, from the files as they are."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

WIDTH = 80


def sep(char: str, title: str | None = None) -> str:
    """A separator line as pytest's terminal writer draws it (80 columns)."""
    if title is None:
        return char * WIDTH
    fill = char * max((WIDTH - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + char if len(line) + 1 <= WIDTH else line


def summary_line(kind: str, nodeid: str, message: str) -> str:
    line = f"{kind} {nodeid}"
    room = WIDTH - len(line) - 3
    if len(message) > room:
        message = message[: max(room - 3, 0)] + "..."
    return f"{line} - {message}"


def collect(files: dict[str, str], target: str) -> list[tuple[str, str, int]]:
    """(path, test name, number of items) for the tests pytest would collect at `target`."""
    if "::" in target:
        path, name = target.split("::", 1)
        return [(path, name, 1)]
    if target.endswith(".py"):
        paths = [target]
    else:
        prefix = target.rstrip("/") + "/"
        paths = sorted(
            p for p in files if p.startswith(prefix) and Path(p).name.startswith("test_") and p.endswith(".py")
        )
    found = []
    for path in paths:
        for node in ast.parse(files[path]).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                count = 1
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize":
                        count *= len(deco.args[1].elts)
                found.append((path, node.name, count))
    return found


def duration(key: str, low: int, high: int) -> str:
    """A made-up but stable run time: the sample must come out the same on every build."""
    value = low + int(hashlib.sha1(key.encode()).hexdigest(), 16) % (high - low + 1)
    return f"{value / 100:.2f}s"


@dataclass
class Failure:
    """A failing test in a transcript's pytest run: its traceback section and summary message."""

    test: str
    traceback: str
    message: str

    def __post_init__(self) -> None:
        # pytest pads the empty lines of an assertion explanation to "E" + 9 spaces; the
        # task files hold tracebacks without trailing whitespace, which editors would strip
        self.traceback = re.sub(r"(?m)^E$", "E" + " " * 9, self.traceback)
        # ... and ends a traceback entry's location line and a "_ _ _" separator with a space
        self.traceback = re.sub(r"(?m)^(\S+\.py:\d+:|(?:_ )+_)$", r"\1 ", self.traceback)


def pytest_quiet(files: dict[str, str], target: str, failures: list[Failure], key: str) -> str:
    """The output of `pytest -q target` when exactly `failures` fail."""
    items = collect(files, target)
    failed = {f.test for f in failures}
    progress = "".join(("F" if name in failed else ".") * n for _, name, n in items)
    lines = [progress.ljust(WIDTH - 7) + "[100%]"]
    n_total = sum(n for _, _, n in items)
    if failures:
        lines.append(sep("=", "FAILURES"))
        for failure in failures:
            lines.append(sep("_", failure.test))
            lines.append("")
            lines.extend(failure.traceback.rstrip("\n").split("\n"))
        lines.append(sep("=", "short test summary info"))
        paths = {name: path for path, name, _ in items}
        for failure in failures:
            nodeid = f"{paths[failure.test]}::{failure.test}"
            lines.append(summary_line("FAILED", nodeid, failure.message))
    time = duration(key, 42, 71)
    counts = [f"{len(failures)} failed"] if failures else []
    if n_total > len(failures):
        counts.append(f"{n_total - len(failures)} passed")
    lines.append(f"{', '.join(counts)} in {time}")
    return "\n".join(lines) + "\n"
