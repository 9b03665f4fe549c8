"""The issue's own examples: the code blocks and `>>>` lines of the task's statement, run on the
base code, on the reference fix and on each candidate.

Nearly every passing candidate behaves like the reference fix on them, so they rarely rank;
where one does not, they say how it differs in the issue's own terms. They are shown, never
ranked by alone (issue 32).

`statement_examples` finds them; the examples' driver (example_driver.py), seated in a run's
copy (`seat_examples`) and started by `driver_argv`, runs each in a process of its own and
records what it printed and how it ended; `read_examples` reads that record back
(`ExampleRuns`), and `compare_examples` says, per example, whether a candidate behaves like the
reference fix and whether the fix changed it at all.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grading.execution.records import read_record, seat

DRIVER_SOURCE = Path(__file__).with_name("example_driver.py").read_text(encoding="utf-8")
EXAMPLES, RESULTS = "examples.json", "examples.jsonl"
MAX_EXAMPLES = 10
MAX_STATEMENT_CHARS = 200_000  # the examples are read from the statement's start, this far
MAX_EXAMPLE_CHARS = 4000
SECONDS_EACH = 10.0
# The driver keeps 8 KiB of each example's output, which writing its folders by name may lengthen.
MAX_OUTPUT_CHARS = 16 * 1024
MAX_RECORD_BYTES = 4 * 1024**2
STATUSES = ("exit", "timeout")
CUT = "\n[the output goes on past 8 KiB]"

# A fence's line: its fence and, opening, its info string (the first word: the language).
_FENCE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_PYTHON = {"", "python", "python3", "py", "py3", "pycon", "python-repl", "ipython", "doctest"}
_PROMPT = re.compile(r"^[ \t]*>>>(?: |$)")
_MORE = re.compile(r"^[ \t]*\.\.\.(?: |$)")


@dataclass(frozen=True)
class Example:
    """A piece of the statement's Python. `session`: from `>>>` lines, whose statements each
    stand alone (one that raises does not end the example), the outputs they were shown with
    left out."""

    source: str
    session: bool = False


@dataclass(frozen=True)
class ExampleOutcome:
    """How one example ended on one copy: `status` `exit` (with its `exit_code`: 1 when a
    statement raised) or `timeout`; `output`, stdout and stderr together, as the driver
    normalised it (the copy's folder, memory addresses), with the bytes it left out said."""

    status: str
    exit_code: int | None
    output: str

    def to_dict(self) -> dict:
        return {"status": self.status, "exit_code": self.exit_code, "output": self.output}

    @classmethod
    def from_dict(cls, data: dict) -> ExampleOutcome:
        return cls(str(data["status"]), data["exit_code"], str(data["output"]))


@dataclass(frozen=True)
class ExampleRuns:
    """The examples of one copy, in the statement's order: an outcome each, None for one the
    driver did not get to (its time ran out, or the record was tampered with). `problems`: what
    was wrong with the record, in words."""

    outcomes: tuple[ExampleOutcome | None, ...]
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"outcomes": [o and o.to_dict() for o in self.outcomes], "problems": list(self.problems)}

    @classmethod
    def from_dict(cls, data: dict) -> ExampleRuns:
        return cls(tuple(o and ExampleOutcome.from_dict(o) for o in data["outcomes"]), tuple(data["problems"]))


@dataclass(frozen=True)
class ExampleComparison:
    """One example on the base code, the reference fix and a candidate (None: not run there).
    `like_reference`: the candidate printed and ended as the reference did; `fix_changes_it`:
    the reference did not as the base did (what the fix is about). None when a side is missing."""

    index: int
    base: ExampleOutcome | None
    reference: ExampleOutcome | None
    candidate: ExampleOutcome | None

    @property
    def like_reference(self) -> bool | None:
        return None if self.reference is None or self.candidate is None else self.candidate == self.reference

    @property
    def fix_changes_it(self) -> bool | None:
        return None if self.reference is None or self.base is None else self.reference != self.base


def statement_examples(statement: str, *, limit: int = MAX_EXAMPLES) -> list[Example]:
    """The Python of `statement` (markdown, as GitHub issues are), in order, each once, at most
    `limit`: each fenced block marked Python or unmarked, as a script, or as a session when it
    has `>>>` lines; then the `>>>` lines of the text outside blocks, as one session (an issue
    often imports in one paragraph and calls in the next). A piece is kept when, dedented, it
    parses and does something: not a traceback, a shell session or a printed value (a literal
    alone). Indented (unfenced) code blocks are left out: in an issue they are more often
    output than code."""
    blocks, prose = _fenced(statement[:MAX_STATEMENT_CHARS])
    found = [_session(text) if any(_PROMPT.match(line) for line in text.splitlines()) else Example(text)
             for language, text in blocks if language in _PYTHON]
    found.append(_session(prose))
    kept: dict[Example, None] = {}
    for example in found:
        source = textwrap.dedent(example.source).strip("\n") + "\n"
        if len(kept) < limit and _runnable(source):
            kept[Example(source, example.session)] = None
    return list(kept)


def _fenced(markdown: str) -> tuple[list[tuple[str, str]], str]:
    """([(language, text)] of the fenced blocks, the text outside them), in one pass: a block
    ends at a fence of its kind at least as long as its own, or with the text (CommonMark)."""
    blocks: list[tuple[str, str]] = []
    prose: list[str] = []
    opened, language, inside = None, "", []
    for line in markdown.splitlines():
        fence = _FENCE.match(line)
        if opened is None and fence:
            opened, language, inside = fence["fence"], (fence["info"].split() or [""])[0].lower(), []
        elif opened is None:
            prose.append(line)
        elif fence and not fence["info"].strip() and fence["fence"].startswith(opened):
            blocks.append((language, "\n".join(inside)))
            opened = None
        else:
            inside.append(line)
    if opened is not None:
        blocks.append((language, "\n".join(inside)))
    return blocks, "\n".join(prose)


def _session(text: str) -> Example:
    """The source of the `>>>` lines in `text`: each prompt's line and the `...` lines that go
    on from it; the lines after them, their output, left out."""
    lines, going_on = [], False
    for line in text.splitlines():
        going_on = bool(_PROMPT.match(line) or (going_on and _MORE.match(line)))
        if going_on:
            lines.append(line.lstrip()[4:])
    return Example("\n".join(lines), session=True)


def _runnable(source: str) -> bool:
    if len(source) > MAX_EXAMPLE_CHARS:
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return any(not _printed_value(statement) for statement in tree.body)


def _printed_value(statement: ast.stmt) -> bool:
    """Whether the statement is a value alone (`[1, 2]`, `True`, `ok`): what an issue shows as
    output, which parses but runs nothing."""
    if not isinstance(statement, ast.Expr):
        return False
    if isinstance(statement.value, ast.Name):
        return True
    try:
        ast.literal_eval(statement.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def seat_examples(workdir: Path, examples: Sequence[Example]) -> str:
    """Write the driver and `examples` into `workdir`, a run's copy, in a new folder of a random
    name; the name, for `driver_argv`."""
    listing = [{"source": e.source, "session": e.session} for e in examples]
    return seat(workdir, "e", DRIVER_SOURCE, {EXAMPLES: json.dumps(listing)})


def driver_argv(folder: str, *, tracer: str | None = None, seconds_each: float = SECONDS_EACH) -> list[str]:
    """The words that run the driver seated in `folder` with `python` (the environment's, first
    on PATH), each example within `seconds_each`; `tracer`: a tracer's folder
    (trace.seat_tracer), started in each example's process."""
    return ["python", f"{folder}/{folder}.py", f"{seconds_each:g}", *([tracer] if tracer else [])]


def read_examples(folder: Path, count: int) -> ExampleRuns:
    """The record of the driver in `folder` (a run's copy's, before the copy is removed), for
    `count` examples: no link followed, no FIFO read, at most MAX_RECORD_BYTES; a line the
    driver does not write is left out and said."""
    text, problems = read_record(folder, RESULTS, max_bytes=MAX_RECORD_BYTES, owner="the examples' driver")
    outcomes: list[ExampleOutcome | None] = [None] * count
    for number, line in enumerate(text.splitlines(), 1):
        record = _line(line, count)
        if record is None or outcomes[record["index"]] is not None:
            problems.append(f"the examples' driver's record holds a line it did not write (line {number})")
            continue
        outcomes[record["index"]] = ExampleOutcome(record["status"], record["exit_code"], _output(record))
    return ExampleRuns(tuple(outcomes), tuple(dict.fromkeys(problems)))


def _line(line: str, count: int) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(record, dict) and type(record.get("index")) is int and 0 <= record["index"] < count
            and record.get("status") in STATUSES and type(record.get("cut")) is int
            and isinstance(record.get("output"), str) and len(record["output"]) <= MAX_OUTPUT_CHARS):
        return None
    exit_code = record.get("exit_code")
    if (record["status"] == "exit") != (type(exit_code) is int):
        return None
    return record


def _output(record: dict) -> str:
    # The bytes left out are not counted: an example stopped at its time prints as much as the
    # machine managed, and two copies that behave alike must read alike.
    return record["output"] + (CUT if record["cut"] > 0 else "")


def compare_examples(base: ExampleRuns, reference: ExampleRuns, candidate: ExampleRuns) -> list[ExampleComparison]:
    """Per example, in order, its outcomes on the three copies (each of `examples` of the
    same statement)."""
    count = max(len(base.outcomes), len(reference.outcomes), len(candidate.outcomes))

    def at(runs: ExampleRuns, index: int) -> ExampleOutcome | None:
        return runs.outcomes[index] if index < len(runs.outcomes) else None

    return [ExampleComparison(i, at(base, i), at(reference, i), at(candidate, i)) for i in range(count)]
