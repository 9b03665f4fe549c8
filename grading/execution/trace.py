"""Behaviour against the reference fix, on the functions it changes.

The task's reference fix changes some functions; a candidate that fixes the same issue should
make the same of the same calls. `traced_functions` finds those functions (`Target`s) in the
base code; the tracer (tracer.py), seated in a run's copy (`seat_tracer`) and loaded by the
test command (`tracer_env`), records each call of them while the tests and the issue's examples
run: the arguments, and the result or the exception's type. `read_trace` reads that record back
(`TraceRecord`), and `compare_traces` lists the calls a candidate and the reference both made
whose outcomes differ (`Divergence`). Beside the test patch's files, the trace runs the
codebase's test files that call those functions most (`calling_tests`): a test patch often
calls a changed function only the way the issue did, and a candidate that differs elsewhere
(with other arguments, another type) shows there.

On graded SWE-bench groups the count of divergences separated 28 pairs of candidates, right on
21; with shortest-first as its tie-breaker it reached 0.66 pairwise accuracy, against 0.45 for
shortest-first alone (issue 32).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from grading.diffs import MODIFIED, FileDiff, parse_patch
from grading.execution.records import read_record, seat
from grading.execution.selection import PatchSplitError, file_patches, runnable_test_path

TRACER_SOURCE = Path(__file__).with_name("tracer.py").read_text(encoding="utf-8")
CALLS, TARGETS = "calls.jsonl", "targets.json"
MAX_TARGETS = 20
MAX_CALLING_FILES = 3
# Per target, the distinct argument lists kept: the tracer writes at most 100 (args, outcome)
# lines per process, and the tests and each example are a process of their own.
MAX_CALLS = 200
MAX_RECORD_BYTES = 16 * 1024**2
MAX_FIELD_CHARS = 400  # the tracer cuts a repr at 300 characters, and prefixes an outcome with a verb
MAX_PROBLEMS = 20
# Where a codebase's modules start when they are not at its root: `src/pkg/mod.py` is `pkg.mod`.
_SOURCE_ROOTS = ("src", "lib")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Blocks whose definitions are still the module's or the class's own (`if PY2: def f(): ...`).
_BLOCKS = (ast.If, ast.Try, ast.With)


@dataclass(frozen=True)
class Target:
    """A function or method of the codebase: the file it is defined in, and its name there
    (`Class.method`, `function`)."""

    path: str
    qualname: str

    @property
    def name(self) -> str:
        return f"{self.path}::{self.qualname}"

    @property
    def modules(self) -> tuple[str, ...]:
        """The names its module may be imported by: its path from the codebase's root, and
        without a source root (`src/`) in front."""
        parts = self.path.removesuffix(".py").split("/")
        if parts[-1] == "__init__":
            parts.pop()
        names = [".".join(parts)]
        if len(parts) > 1 and parts[0] in _SOURCE_ROOTS:
            names.append(".".join(parts[1:]))
        return tuple(names)


@dataclass(frozen=True)
class TraceRecord:
    """What one run's tracer recorded. `calls`: {(target name, arguments): the outcomes seen
    ("returns 10", "raises ValueError"), sorted}; two or more outcomes for one call mean it
    does not decide its outcome alone (time, randomness, state). `missing`: the targets whose
    module loaded without them. `loaded`: whether the tracer started at all. `problems`: what
    was wrong with the record, in words: the run's code can write to it."""

    calls: Mapping[tuple[str, str], tuple[str, ...]]
    missing: tuple[str, ...] = ()
    loaded: bool = True
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"calls": [[target, args, list(outcomes)] for (target, args), outcomes in sorted(self.calls.items())],
                "missing": list(self.missing), "loaded": self.loaded, "problems": list(self.problems)}

    @classmethod
    def from_dict(cls, data: Mapping) -> TraceRecord:
        return cls({(str(target), str(args)): tuple(map(str, outcomes)) for target, args, outcomes in data["calls"]},
                   tuple(map(str, data["missing"])), bool(data["loaded"]), tuple(map(str, data["problems"])))


@dataclass(frozen=True)
class Divergence:
    """A call that the reference fix and a candidate both made, with the same arguments, and
    whose outcomes differ."""

    target: str
    args: str
    reference: str
    candidate: str

    def __str__(self) -> str:
        return f"{self.target}({self.args}): the reference {self.reference}, this one {self.candidate}"


def traced_in(reference_patch: str | None, checkout: Path) -> list[Target]:
    """The functions of `checkout` (the base code, a folder) that `reference_patch` changes, read
    from the files it modifies; none without a fix, or for one that cannot be cut by file (the
    plan skips it, saying so)."""
    if not reference_patch:
        return []
    try:
        paths = [f.path for f in file_patches(reference_patch)]
    except PatchSplitError:
        return []
    base = {path: (checkout / path).read_text(encoding="utf-8", errors="replace")
            for path in paths if (checkout / path).is_file()}
    return traced_functions(reference_patch, base)


def calling_tests(targets: Sequence[Target], checkout: Path, codebase_files: Sequence[str], *,
                  skip: Iterable[str] = (), limit: int = MAX_CALLING_FILES) -> list[str]:
    """The Python test files of `checkout` (the base code) that call `targets` by name most often,
    most calls first (then by path), at most `limit`, none of `skip` (the test patch's files,
    which the trace runs anyway) and none that call none of them."""
    names = {_called_as(target.qualname) for target in targets}
    if not names:
        return []
    call = re.compile(rf"\b(?:{'|'.join(sorted(map(re.escape, names)))})\s*\(")
    skipped = set(skip)
    counts = {}
    for path in codebase_files:
        if path.endswith(".py") and runnable_test_path(path) and path not in skipped:
            try:
                text = (checkout / path).read_text(encoding="utf-8", errors="replace")
            except OSError:  # a broken symlink, a folder named like a file
                continue
            found = len(call.findall(text))
            if found:
                counts[path] = found
    return sorted(counts, key=lambda path: (-counts[path], path))[:limit]


def _called_as(qualname: str) -> str:
    """The name a call of `qualname` is written with: a constructor by its class's."""
    *owners, name = qualname.split(".")
    return owners[-1] if name == "__init__" and owners else name


def traced_functions(reference_patch: str, base_files: Mapping[str, str], *,
                     limit: int = MAX_TARGETS) -> list[Target]:
    """The functions and methods of the base code whose definitions `reference_patch` changes,
    in the patch's order, at most `limit`. `base_files`: {path: text} of the files it modifies
    (others are not looked at; files it adds, deletes or renames have no targets).

    Only what the base has: the functions the fix adds or removes are not traced, since a
    candidate would have nothing to compare (a new helper shows in the traced function that
    calls it). Test files are left out, and so are nested functions (a wrapper cannot reach
    them: a change in one is a change of the function around it). Changes that leave the
    syntax tree as it was (comments, blank lines, moves) change nothing. A file that does not
    parse, or that the patch does not apply to, has no targets."""
    targets: list[Target] = []
    for diff in parse_patch(reference_patch).files:
        base = base_files.get(diff.path)
        if diff.status != MODIFIED or diff.is_test or not diff.path.endswith(".py") or base is None:
            continue
        try:
            before, after = _definitions(base), _definitions(_patched(base, diff))
        except (SyntaxError, ValueError):
            continue
        targets += [Target(diff.path, name) for name, tree in before.items()
                    if name in after and after[name] != tree]
    return targets[:limit]


def _definitions(source: str) -> dict[str, tuple[str, ...]]:
    """{qualified name: its definitions' syntax trees, dumped} of the functions a wrapper can
    reach: the module's and its classes' (a property's getter and setter share a name)."""
    found: dict[str, tuple[str, ...]] = defaultdict(tuple)

    def visit(body: Iterable[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, _DEFINITIONS):
                found[prefix + node.name] += (ast.dump(node),)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, _BLOCKS):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, ()), prefix)
                for handler in getattr(node, "handlers", ()):
                    visit(handler.body, prefix)

    visit(ast.parse(source).body, "")
    return dict(found)


def _patched(base: str, diff: FileDiff) -> str:
    """`base` with `diff`'s hunks applied as they stand; ValueError where a line the hunk
    keeps or removes is not the base's."""
    old = base.split("\n")
    new: list[str] = []
    at = 0  # the next line of `old` not yet copied
    for hunk in diff.hunks:
        start = max(hunk.source_start - 1, 0) if any(kind != "+" for kind, _ in hunk.lines) else hunk.source_start
        if start < at:
            raise ValueError("hunks overlap")
        new += old[at:start]
        at = start
        for kind, text in hunk.lines:
            if kind != "+":
                if at >= len(old) or old[at].rstrip("\r") != text:
                    raise ValueError(f"line {at + 1} is not the patch's")
                at += 1
            if kind != "-":
                new.append(text)
    return "\n".join(new + old[at:])


def seat_tracer(workdir: Path, targets: Sequence[Target]) -> str:
    """Write the tracer and its targets into `workdir`, a run's copy, in a new folder of a
    random name that is also its module's; the name, for `tracer_env`."""
    listing = [{"name": t.name, "path": t.path, "qualname": t.qualname, "modules": list(t.modules)}
               for t in targets]
    return seat(workdir, "t", TRACER_SOURCE, {TARGETS: json.dumps(listing)})


def tracer_env(folder: str) -> str:
    """A shell line that makes the pytest runs after it load the tracer seated in `folder`
    (the copy's folder the shell is in), before any conftest or tested module. It goes before
    `Environment.test_script`'s lines, whose referee, when there is one, keeps it."""
    quoted = shlex.quote(folder)
    # A fixed hash seed: a result built from a set's order is then the same in every run.
    return (f'PYTEST_PLUGINS={quoted}"${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"; '
            f'PYTHONPATH="$PWD"/{quoted}"${{PYTHONPATH:+:$PYTHONPATH}}"; PYTHONHASHSEED=0; '
            "export PYTEST_PLUGINS PYTHONPATH PYTHONHASHSEED")


def read_trace(folder: Path, targets: Sequence[Target]) -> TraceRecord:
    """The record of the tracer in `folder` (a run's copy's, before the copy is removed): no
    link followed, no FIFO read, at most MAX_RECORD_BYTES; a line the tracer does not write,
    or that names no target of `targets`, is left out and said."""
    text, problems = read_record(folder, CALLS, max_bytes=MAX_RECORD_BYTES, owner="the tracer")
    names = {t.name for t in targets}
    calls: dict[tuple[str, str], set[str]] = defaultdict(set)
    per_target: dict[str, int] = defaultdict(int)
    missing: set[str] = set()
    loaded = False
    for number, line in enumerate(text.splitlines(), 1):
        record = _line(line, names)
        if record is None:
            problems.append(f"the tracer's record holds a line it did not write (line {number})")
        elif record["event"] == "loaded":
            loaded = True
        elif record["event"] == "missing":
            missing.add(record["target"])
        else:
            target, key = record["target"], (record["target"], record["args"])
            if key not in calls and per_target[target] == MAX_CALLS:
                problems.append(f"{target} has more calls than the {MAX_CALLS} kept")
                continue
            per_target[target] += key not in calls
            calls[key].add(record["outcome"])
    problems = list(dict.fromkeys(problems))
    if len(problems) > MAX_PROBLEMS:
        problems[MAX_PROBLEMS - 1:] = [f"and {len(problems) - MAX_PROBLEMS + 1} more"]
    return TraceRecord({key: tuple(sorted(outcomes)) for key, outcomes in sorted(calls.items())},
                       tuple(sorted(missing)), loaded, tuple(problems))


def _line(line: str, names: set[str]) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    event = record.get("event")
    if event == "loaded":
        return record
    if event not in ("call", "missing") or record.get("target") not in names:
        return None
    if event == "call" and not all(isinstance(record.get(field), str) and len(record[field]) <= MAX_FIELD_CHARS
                                   for field in ("args", "outcome")):
        return None
    return record


def compare_traces(reference: TraceRecord, candidate: TraceRecord) -> list[Divergence]:
    """The calls both records hold, with the same target and arguments, whose outcome differs,
    sorted by target and arguments. A call with more than one outcome in either record is not
    compared: its outcome is not the code's alone. At most the records' bound (MAX_CALLS per
    target, MAX_TARGETS targets)."""
    return [Divergence(target, args, reference.calls[target, args][0], outcomes[0])
            for (target, args), outcomes in sorted(candidate.calls.items())
            if len(outcomes) == 1 and len(reference.calls.get((target, args), ())) == 1
            and reference.calls[target, args] != outcomes]

