"""What a test command's output says about each test.

pytest with `-rA` ends with a short summary, a line per test: `PASSED tests/test_x.py::t`,
`FAILED tests/test_x.py::t - AssertionError...`, `ERROR tests/test_x.py - ImportError...`
(a file that does not collect). Only the lines after the last summary header are read,
so that what the tests print before it is not taken for a result. The tests run in the
same process as pytest and could forge the summary: the matrix is evidence for a grader
to weigh, not a security boundary.
"""

from __future__ import annotations

import re

from grading.execution.matrix import ERROR, FAIL, PASS

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)
_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*?)(?: - .*)?$")
# An expected failure is pytest's own pass; a strict unexpected pass it reports as FAILED.
_OUTCOMES = {"PASSED": PASS, "XFAIL": PASS, "XPASS": PASS, "FAILED": FAIL, "ERROR": ERROR}
# A test that passes and then errors in its teardown has two lines: the worse one counts.
_WORSE = {PASS: 0, FAIL: 1, ERROR: 2}


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
