"""The grader's actions as JSON schemas, for constrained decoding.

One model turn is one JSON action: a workspace tool call or the ranking submission.
Every free string is bounded by a `pattern` repeat (xgrammar ignores maxLength) and kept
to printable ASCII without '"' or '\\', so a reply's length in characters, and so in
tokens, has a bound the grader can give as max_new_tokens (`action_char_bound`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from grading.rankings import FLAGS
from grading.workspace import EVIDENCE_TOOLS, SUBMIT, Workspace

TEXT = r"[ !#-\[\]-~]"
WORD = r"[!#-\[\]-~]"
PATTERN_CHARS = 80
PATH_CHARS = 200
MAX_TURN_INDEX = 99999
MAX_LINE = 999999
TESTS_PER_RUN = 8
TEST_CHARS = 160
COMMAND_CHARS = 300
ENUMERATE_RANKINGS = 4


def _text(min_chars: int, max_chars: int) -> dict:
    if min_chars:
        return {"type": "string", "pattern": f"^{WORD}{_at_most(max_chars - 1)}$"}
    return {"type": "string", "pattern": f"^{_at_most(max_chars)}$"}


def _at_most(n: int, chunk: int = 120) -> str:
    """TEXT{0,n} written so that xgrammar matches it fast at any n.

    xgrammar 0.2.9 takes ~10 us a token inside TEXT{0,128} but ~570 us inside TEXT{0,200}
    or more; an unambiguous nesting of short repeats (up to chunk-1, or exactly chunk
    then the rest) keeps ~7 us at any bound and means the same.

    >>> import re
    >>> [bool(re.fullmatch(_at_most(300), "x" * k)) for k in (0, 300, 301)]
    [True, True, False]
    """
    if n <= chunk:
        return f"{TEXT}{{0,{n}}}"
    return f"(?:{TEXT}{{0,{chunk - 1}}}|{TEXT}{{{chunk}}}{_at_most(n - chunk, chunk)})"


def _object(**properties) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def weak_orders(labels: Sequence[str]) -> list[list[list[str]]]:
    """Every ranking with ties of `labels` (ordered set partitions; tiers keep label order)."""
    if not labels:
        return [[]]
    orders = []
    for mask in range(1, 2 ** len(labels)):
        tier = [lab for i, lab in enumerate(labels) if mask >> i & 1]
        rest = [lab for i, lab in enumerate(labels) if not mask >> i & 1]
        orders += [[tier, *tail] for tail in weak_orders(rest)]
    return orders


def submission_schema(workspace: Workspace, rationale_chars: int) -> dict:
    """Up to ENUMERATE_RANKINGS passing labels the schema lists every valid ranking (75 for
    4), so decoding cannot produce an invalid one; above, the ranking is checked afterwards."""
    passing = list(workspace.passing_labels)
    n = len(passing)
    if n <= ENUMERATE_RANKINGS:
        ranking = {"enum": weak_orders(passing)}
    else:
        ranking = {"type": "array", "minItems": 1, "maxItems": n, "items": {
            "type": "array", "minItems": 1, "maxItems": n, "items": {"enum": passing}}}
    return _object(
        tool={"const": SUBMIT},
        ranking=ranking,
        rationales=_object(**{lab: _text(1, rationale_chars) for lab in passing}),
        flags=_object(**{lab: {"type": "array", "maxItems": 3, "items": {"enum": list(FLAGS)}}
                         for lab in passing}),
    )


def code_tool_schemas(labels: dict) -> list[dict]:
    """view_file, run_tests and run over `labels` (an enum), and run_all."""
    line = {"type": "integer", "minimum": 0, "maximum": MAX_LINE}
    return [
        _object(tool={"const": "view_file"}, label=labels, path=_text(0, PATH_CHARS), start=line, end=line),
        _object(tool={"const": "run_tests"}, label=labels, tests={
            "type": "array", "minItems": 1, "maxItems": TESTS_PER_RUN, "items": _text(1, TEST_CHARS)}),
        _object(tool={"const": "run"}, label=labels, command=_text(1, COMMAND_CHARS)),
        _object(tool={"const": "run_all"}, command=_text(1, COMMAND_CHARS)),
    ]


def action_schema(workspace: Workspace, rationale_chars: int, *, submit: bool = True) -> dict:
    """One JSON action: a tool call (the code tools where the workspace offers them), or (when
    `submit`) the submission."""
    labels = {"enum": list(workspace.labels)}
    turn = {"type": "integer", "minimum": 0, "maximum": MAX_TURN_INDEX}
    return {"anyOf": [
        _object(tool={"const": "list_trajectories"}),
        _object(tool={"const": "view_patch"}, label=labels, path=_text(0, PATH_CHARS)),
        _object(tool={"const": "view_transcript"}, label=labels, start=turn, end=turn),
        _object(tool={"const": "search"}, pattern=_text(1, PATTERN_CHARS),
                labels={"type": "array", "maxItems": len(workspace.labels), "items": labels}),
        _object(tool={"const": "compare"}, a=labels, b=labels),
        _object(tool={"const": "view_tests"}, label=labels),
        *(_object(tool={"const": name}) for name in EVIDENCE_TOOLS),
        *(code_tool_schemas(labels) if workspace.code_offered else []),
        *([submission_schema(workspace, rationale_chars)] if submit else []),
    ]}


def action_char_bound(workspace: Workspace, rationale_chars: int, *, submit_only: bool) -> int:
    """The longest reply the schema allows, in characters (so also in byte-level tokens)."""
    passing, labels = workspace.passing_labels, workspace.labels
    longest_flags = sorted(FLAGS, key=len)[-3:]
    submission = {"tool": SUBMIT, "ranking": [[lab] for lab in passing],
                  "rationales": {lab: "x" * rationale_chars for lab in passing},
                  "flags": {lab: longest_flags for lab in passing}}
    candidates = [submission]
    if not submit_only:
        candidates += [
            {"tool": "view_patch", "label": labels[-1], "path": "x" * PATH_CHARS},
            {"tool": "search", "pattern": "x" * PATTERN_CHARS, "labels": list(labels)},
            {"tool": "view_transcript", "label": labels[-1], "start": MAX_TURN_INDEX,
             "end": MAX_TURN_INDEX},
        ]
    if not submit_only and workspace.code_offered:
        candidates += [
            {"tool": "view_file", "label": labels[-1], "path": "x" * PATH_CHARS, "start": MAX_LINE,
             "end": MAX_LINE},
            {"tool": "run_tests", "label": labels[-1], "tests": ["x" * TEST_CHARS] * TESTS_PER_RUN},
            {"tool": "run", "label": labels[-1], "command": "x" * COMMAND_CHARS},
        ]
    return max(len(json.dumps(c, separators=(", ", ": "))) for c in candidates)
