"""What a test run says about each test: from the referee's record for pytest, else the output.

A pytest run is read from the record of the referee (referee.py), a plugin the runner
seats in the run's copy, in a folder of a random name, after the patch is applied and
the setup has run (`seat_referee`), and that the test script loads before any conftest
or tested module (`Environment.test_script`). `read_referee` reads its record once the
run is over, and weighs it against what the run printed and how it exited: a summary
that passes what failed, an exit status of 0 that pytest did not give, is tampering.

pytest with `-rA` also ends with a short summary, a line per test: `PASSED
tests/test_x.py::t`, `FAILED tests/test_x.py::t - AssertionError...`, `ERROR
tests/test_x.py - ImportError...` (a file that does not collect). `parse_pytest_summary`
reads the lines after the last summary header; the tests run in pytest's process and can
print one of their own, which is what the referee's record is checked against.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from grading.diff_markers import is_runner_source
from grading.execution.environment import REFEREE_SOURCE
from grading.execution.matrix import ERROR, FAIL, PASS
from grading.execution.records import read_record, seat
from grading.execution.selection import file_patches
from grading.sandbox import RunResult
from grading.sandbox import limits as sandbox_status

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)
_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*?)(?: - .*)?$")
# An expected failure is pytest's own pass; a strict unexpected pass it reports as FAILED.
_OUTCOMES = {"PASSED": PASS, "XFAIL": PASS, "XPASS": PASS, "FAILED": FAIL, "ERROR": ERROR}
# A test that passes and then errors in its teardown has two lines: the worse one counts.
_WORSE = {PASS: 0, FAIL: 1, ERROR: 2}

RESULTS = "results.jsonl"
# The referee writes about 150 bytes a test: a record past this was not its alone.
MAX_RESULTS_BYTES = 16 * 1024**2
# What a run stores of its tampering: the record is the tests' to write, and so its words.
MAX_TAMPERING, MAX_TAMPERING_CHARS = 20, 300
_PHASES = ("collect", "setup", "call", "teardown")
# The referee's outcome of a phase, as a matrix cell: a skip is no cell, and a failure
# outside the test's own call is an error, as pytest's summary has them.
_CALL_STATUS = {"passed": PASS, "xfailed": PASS, "xpassed": PASS, "failed": FAIL, "skipped": None}
_OTHER_STATUS = {**_CALL_STATUS, "passed": None, "failed": ERROR}
_FIELDS = {"loaded": {}, "finished": {"exitstatus": int}, "tampering": {"what": str},
           "phase": {"test": str, "when": str, "outcome": str},
           "hook": {"hook": str, "plugin": str}}


def parse_pytest_summary(output: str) -> dict[str, str]:
    """{test id: pass, fail or error} from pytest's `-rA` short summary in `output`; {}
    when there is none (pytest did not get that far, or the output was cut there).
    Skipped tests are not named by pytest's summary (only their file and line), so they
    have no entry."""
    headers = list(_SUMMARY_HEADER.finditer(output))
    if not headers:
        return {}
    outcomes: dict[str, str] = {}
    for line in output[headers[-1].end():].splitlines():
        match = _SUMMARY_LINE.match(line)
        if match:
            outcome, test = _OUTCOMES[match.group(1)], match.group(2)
            if _WORSE[outcome] >= _WORSE[outcomes.get(test, PASS)]:
                outcomes[test] = outcome
    return outcomes


def seat_referee(workdir: Path) -> str:
    """Write the referee into `workdir`, a run's copy, in a new folder of a random name
    that is also its module's: the name, for `Environment.test_script`. Random, so that a
    patch cannot name it in advance (a process that looks for it finds it: docs/sandbox.md)."""
    return seat(workdir, "r", REFEREE_SOURCE)


@dataclass(frozen=True)
class Refereed:
    """A pytest run as its referee recorded it. `status`: `pass` when pytest finished its
    session with exit status 0 and every test passed, else `fail`; None when the run did
    not conclude (killed, not started): its own status stands. `tests`: each test's status,
    as `parse_pytest_summary` gives them. `tampering`: what was done to the runner, each
    said in words. `reason`: why a run that concluded has no verdict of pytest's own."""

    status: str | None
    tests: dict[str, str]
    tampering: tuple[str, ...]
    reason: str = ""


def read_referee(folder: Path, result: RunResult, patch: str) -> Refereed:
    """The run of `result` as the referee in `folder` recorded it; `patch` is the change
    the run applied, whose code files are the candidate's: a hook implemented in one of
    them is a plugin the candidate's code loaded."""
    text, tampering = read_record(folder, RESULTS, max_bytes=MAX_RESULTS_BYTES, owner="the referee")
    code_files = {f.path for f in file_patches(patch)
                  if not f.is_test and not f.configures_runner and not is_runner_source(f.path)}
    phases: dict[tuple[str, str], str] = {}
    loaded, finished = False, None
    for number, line in enumerate(text.splitlines(), 1):
        record = _record(line)
        if record is None:
            tampering.append(f"the referee's record holds a line it did not write (line {number})")
            continue
        event = record["event"]
        if event == "loaded":
            loaded = True
        elif event == "finished":
            finished = record["exitstatus"]
        elif event == "tampering":
            tampering.append(record["what"])
        elif event == "phase":
            # The last record of a phase stands: a plugin that runs a test again reports each try.
            phases[record["test"], record["when"]] = record["outcome"]
            if "forged" in record:
                tampering.append(f"pytest's report of {record['test']} ({record['when']}) was forged: "
                                 f"{record['forged']}")
        elif event == "hook" and record["file"] is None:
            tampering.append(f"{record['hook']} is implemented by code of no file ({record.get('origin')})")
        elif event == "hook" and record["file"] in code_files:
            tampering.append(f"{record['file']} implements the pytest hook {record['hook']} "
                             f"(plugin {record['plugin']})")
    tests = _tests(phases)
    summary = parse_pytest_summary(result.output)
    forged = sorted(test for test, status in summary.items() if status == PASS and tests.get(test, PASS) != PASS)
    if forged:
        tampering.append(f"the printed summary passes tests that did not pass: {', '.join(forged[:5])}"
                         + (f", +{len(forged) - 5} more" if len(forged) > 5 else ""))
    if result.status == sandbox_status.PASSED and finished is None:
        tampering.append("the tests' process exited 0 before pytest finished its session"
                         + ("" if loaded else ": the referee's record is gone, or it never loaded"))
    elif result.status == sandbox_status.PASSED and finished != 0:
        tampering.append(f"the tests' process exited 0 where pytest's session ended with exit status {finished}")
    tampering = [what[:MAX_TAMPERING_CHARS] for what in dict.fromkeys(tampering)]
    if len(tampering) > MAX_TAMPERING:
        tampering[MAX_TAMPERING - 1:] = [f"and {len(tampering) - MAX_TAMPERING + 1} more"]
    if result.status not in (sandbox_status.PASSED, sandbox_status.FAILED):
        return Refereed(None, tests, tuple(tampering))
    passed = finished == 0 and all(status == PASS for status in tests.values())
    reason = "" if finished is not None else (
        f"pytest did not finish its session (exit code {result.exit_code})" if loaded else
        f"the referee recorded nothing (exit code {result.exit_code}): pytest stopped before loading it, "
        "or the record was removed")
    return Refereed(PASS if passed else FAIL, tests, tuple(tampering), reason)


def _record(line: str) -> dict | None:
    """One line of the record, or None when it is not one the referee writes."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("event") not in _FIELDS:
        return None
    fields = _FIELDS[record["event"]]
    if not all(type(record.get(name)) is kind for name, kind in fields.items()):
        return None
    if record["event"] == "phase" and (record["when"] not in _PHASES or record["outcome"] not in _CALL_STATUS):
        return None
    if record["event"] == "hook" and not isinstance(record.get("file", 0), str | None):
        return None
    return record


def _tests(phases: dict[tuple[str, str], str]) -> dict[str, str]:
    """Each test's status from its phases' outcomes: the worst of them."""
    tests: dict[str, str] = {}
    for (test, when), outcome in phases.items():
        status = (_CALL_STATUS if when == "call" else _OTHER_STATUS)[outcome]
        if status is not None and _WORSE[status] >= _WORSE[tests.get(test, PASS)]:
            tests[test] = status
    return tests
