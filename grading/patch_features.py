"""The features of a passing fix that the heuristic's penalty weighs (grading/penalties.py).

From its patch: its size in fix lines and files, the tests it edits or deletes, its stray
files, debug output, commented-out code and whitespace-only hunks, the task example's values
its added conditions test for, the behaviour it removes or its having none (grading/effects.py)
and how it reaches into the test machinery; from its metrics, its turns and output tokens. Per
group: the files no other passing fix needed, the share of its added lines the other distinct
passing changes lack (consensus), and what the group's execution evidence found
(grading/execution). The heuristic grader ranks by them and the grader agent's evidence tools
show them (grading/evidence.py), both from here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from grading.cases import GroupCase
from grading.diffs import (
    COMMENTED_CODE,
    DEBUG_OUTPUT,
    DELETED,
    DELETES_TESTS,
    STRAY_FILE,
    TAMPERS_WITH_TESTS,
    WHITESPACE_ONLY,
    FileDiff,
    ParsedPatch,
    change_key,
    parse_patch,
    unique_files,
)
from grading.effects import no_effect, removed_behaviour
from grading.execution.verdicts import (
    breaks_tests,
    diverges_from_reference,
    example_differences,
    fails_reward_files,
    flaky,
    reference_control,
    tampers_with_tests,
)

_CONDITION_RE = re.compile(r"^\s*(?:\}\s*else\s+)?(?:el)?if\b|^\s*(?:case|when)\b")
_LITERAL_RE = re.compile(r'"([^"\\]{1,80})"|\'([^\'\\]{1,80})\'|(?<![\w.])(\d+\.\d+|\d{2,})(?![\w.])')
_COMMENT_RE = re.compile(r"^\s*(?:#|//)\s?(.*)$")


@dataclass
class Features:
    """What the penalty is computed from, for one passing trajectory."""

    # changed lines outside tests and stray files, less whitespace-only hunks and
    # lines that have their own term (debug output, commented-out code)
    fix_lines: int
    files: list[str]
    special_cases: list[str]  # the example's literals that added conditions test for
    test_edits: list[str]
    test_removals: list[str]
    stray_files: list[str]
    debug_lines: int
    debug_files: list[str]
    commented_lines: int
    commented_files: list[str]
    whitespace_hunks: int
    whitespace_files: list[str]
    turns: int | None
    tokens: int | None
    unreadable: bool
    unneeded_files: list[str] = field(default_factory=list)
    no_effect: str | None = None  # why the fix changes no behaviour, when it does not
    removed_behaviour: list[str] = field(default_factory=list)  # "path:line `code`" per deleted line
    # from the execution evidence: the tests it fails that most other passing fixes pass
    # ("suite: test"), and why its reward verdict did not reproduce
    broken_tests: list[str] = field(default_factory=list)
    not_reproduced: str | None = None
    # the tests of the test patch's files, beyond the reward's, that it fails, and what they
    # pass by: "the reference fix passes", or without one "most other passing fixes pass"
    reward_files_failed: list[str] = field(default_factory=list)
    reward_files_bar: str = ""
    # how it changes the way the tests run or report: from its patch ("path:line `code`",
    # "path configures the test runner"), then from its runs ("suite: what")
    tampering: list[str] = field(default_factory=list)
    # the traced calls whose outcome differs from the reference fix's (trace.Divergence in words),
    # and the statement's examples (their numbers, from 1) it ends otherwise than the reference fix
    divergences: list[str] = field(default_factory=list)
    example_differences: list[int] = field(default_factory=list)
    # the code lines the fix adds outside tests and stray files, whitespace removed
    added_lines: frozenset[str] = frozenset()
    # filled in per group: how many other distinct passing changes there are, and the
    # mean share of `added_lines` each of them lacks
    other_changes: int = 0
    unshared_added: float = 0.0


def patch_features(parsed: ParsedPatch, metrics: Mapping, statement: str = "") -> Features:
    """Features of one parsed patch; ``unneeded_files`` is filled in per group."""
    fix_lines = 0
    special: list[str] = []
    test_edits, test_removals, stray, debug_files, commented_files, ws_files = [], [], [], [], [], []
    debug_lines = commented_lines = whitespace_hunks = 0
    example = set(_literals(statement))
    added_lines: set[str] = set()
    tampering: list[str] = []
    for f in parsed.files:
        stray_file = STRAY_FILE in f.markers
        if stray_file:
            stray.append(f.path)
        if TAMPERS_WITH_TESTS in f.markers:
            tampering += _tampering(f)
        if DELETES_TESTS in f.markers or (f.is_test and f.status == DELETED):
            test_removals.append(f.path)
        elif f.is_test and f.old_path is not None and f.removed:
            test_edits.append(f.path)
        ws = sum(WHITESPACE_ONLY in h.markers for h in f.hunks)
        if ws:
            whitespace_hunks += ws
            ws_files.append(f.path)
        marks = [m for h in f.hunks for _, m in h.line_markers]
        if DEBUG_OUTPUT in marks:
            debug_lines += marks.count(DEBUG_OUTPUT)
            debug_files.append(f.path)
        kept = _kept_as_comments(f)
        commented = marks.count(COMMENTED_CODE) + kept
        if commented:
            commented_lines += commented
            commented_files.append(f.path)
        if not f.is_test and not stray_file:
            added_lines |= _added_lines(f)
            fix_lines += sum(h.added + h.removed - len(h.line_markers)
                             for h in f.hunks if WHITESPACE_ONLY not in h.markers) - kept
            special += _special_cases(f, example)
    return Features(
        fix_lines=max(fix_lines, 0),
        files=[f.path for f in parsed.files],
        special_cases=list(dict.fromkeys(special)),
        test_edits=test_edits,
        test_removals=test_removals,
        stray_files=stray,
        debug_lines=debug_lines,
        debug_files=debug_files,
        commented_lines=commented_lines,
        commented_files=commented_files,
        whitespace_hunks=whitespace_hunks,
        whitespace_files=ws_files,
        turns=_count(metrics.get("num_turns")),
        tokens=_count(metrics.get("output_tokens")),
        unreadable=parsed.error is not None and not parsed.files,
        added_lines=frozenset(added_lines),
        no_effect=no_effect(parsed),
        removed_behaviour=[str(line) for line in removed_behaviour(parsed)],
        tampering=tampering,
    )


def group_features(group: GroupCase) -> tuple[dict[str, Features], dict[str, object]]:
    """The features of `group`'s passing trajectories and each one's change key
    (`diffs.change_key`), by id. A patch text is parsed once, however many trajectories made
    it (runs of one agent often repeat a change)."""
    passing = group.passing
    by_text: dict[str, ParsedPatch] = {}
    for t in passing:
        if t.patch not in by_text:
            by_text[t.patch] = parse_patch(t.patch)
    parsed = {t.trajectory_id: by_text[t.patch] for t in passing}
    features = {t.trajectory_id: patch_features(parsed[t.trajectory_id], t.metrics, group.statement)
                for t in passing}
    keys = {t.trajectory_id: change_key(parsed[t.trajectory_id], t.patch) for t in passing}
    if len(passing) > 1:
        for tid, paths in unique_files(parsed, among=list(parsed)).items():
            f = features[tid]
            f.unneeded_files = sorted(p for p in paths if p not in f.stray_files
                                      and not parsed[tid].file(p).is_test)
        _consensus(features, keys)
    if group.execution is not None:
        _execution(features, group)
    return features, keys


def group_minima(features: Iterable[Features]) -> dict:
    """What the size, files, turns and tokens terms measure against: the leanest fix (in
    fix lines, among those that change any), the fewest files, turns and output tokens."""
    features = list(features)
    turns = [f.turns for f in features if f.turns is not None]
    tokens = [f.tokens for f in features if f.tokens is not None]
    return {
        "leanest": min((f.fix_lines for f in features if f.fix_lines > 0), default=0),
        "fewest_files": min(len(f.files) for f in features),
        "fewest_turns": min(turns, default=None),
        "fewest_tokens": min(tokens, default=None),
    }


def _consensus(features: Mapping[str, Features], keys: Mapping[str, object]) -> None:
    """Fill in `other_changes` and `unshared_added`: per fix, over the other distinct
    changes that add code (one per change key, so repeats of one change count once; a
    change that only deletes, or does not parse, offers nothing to agree with), the mean
    share of its added lines each of them does not add.

    Counted line by line, not change by change: each other change lacks a line unless it
    adds it, so the lines lacking, summed over the others, are per line the number of other
    changes less those that add it. One count per line over the distinct changes makes it
    linear in the lines of the group (a group of 20,000 passing fixes compared pairwise is
    4e8 set differences); tests hold it to the pairwise definition."""
    distinct: dict[object, frozenset[str]] = {}
    for tid, key in keys.items():
        if features[tid].added_lines:
            distinct.setdefault(key, features[tid].added_lines)
    adding = Counter(line for lines in distinct.values() for line in lines)  # distinct changes adding each line
    for tid, f in features.items():
        own = distinct.get(keys[tid], frozenset())  # its own change, counted in `adding`, is not an other
        others = len(distinct) - (keys[tid] in distinct)
        f.other_changes = others
        if others and f.added_lines:
            lacking = sum(others - adding[line] + (line in own) for line in f.added_lines)
            f.unshared_added = lacking / (others * len(f.added_lines))


def _execution(features: Mapping[str, Features], group: GroupCase) -> None:
    """Fill in `broken_tests`, `reward_files_failed`, `not_reproduced`, `divergences` and
    `example_differences` from the group's matrix, and put first in `tampering` what its runs found."""
    broken = breaks_tests(group.execution)
    unreproduced = flaky(group.execution)
    tampered = tampers_with_tests(group.execution)
    reward_files = fails_reward_files(group.execution)
    diverging = diverges_from_reference(group.execution)
    examples = example_differences(group.execution)
    bar = ("most other passing fixes pass" if reference_control(group.execution).bar is None
           else "the reference fix passes")
    for tid, f in features.items():
        f.broken_tests = [f"{suite}: {test}" for suite, test in broken.get(tid, ())]
        f.reward_files_failed = reward_files.get(tid, [])
        f.reward_files_bar = bar
        f.not_reproduced = unreproduced.get(tid)
        f.tampering = tampered.get(tid, []) + f.tampering  # what was seen before what is read
        f.divergences = [str(d) for d in diverging.get(tid, ())]
        f.example_differences = [i + 1 for i in examples.get(tid, ())]


def _tampering(f: FileDiff) -> list[str]:
    """What `f` (a file marked `tampers_with_tests`) does to the test machinery, for a reader."""
    found = [f"{f.path} configures the test runner"] if f.configures_runner else []
    for h in f.hunks:
        numbers = h.line_numbers()
        found += [f"{f.path}:{numbers[i][1]} `{h.lines[i][1].strip()[:80]}`"
                  for i, marker in h.line_markers if marker == TAMPERS_WITH_TESTS]
    return found


def _added_lines(f: FileDiff) -> set[str]:
    """The code lines `f` adds, all whitespace removed (``f(a, b)`` and ``f(a,b)`` are the
    same line), less whitespace-only hunks, blank lines and lines with a marker of their
    own (debug output, commented-out code)."""
    out = set()
    for h in f.hunks:
        if WHITESPACE_ONLY in h.markers:
            continue
        marked = {i for i, _ in h.line_markers}
        out |= {"".join(text.split()) for i, (kind, text) in enumerate(h.lines)
                if kind == "+" and i not in marked and text.strip()}
    return out


def _literals(text: str) -> list[str]:
    """String and number literals of `text`, first occurrence first."""
    return list(dict.fromkeys(next(g for g in m.groups() if g) for m in _LITERAL_RE.finditer(text or "")))


def _special_cases(f: FileDiff, example: set[str]) -> list[str]:
    """Literals from the task's example that an added condition (with the added line after
    it) tests for, when there are two or more: code that recognises the example instead of
    fixing the cause."""
    if not example:
        return []
    found: list[str] = []
    for h in f.hunks:
        lines = h.lines
        for i, (kind, text) in enumerate(lines):
            if kind != "+" or not _CONDITION_RE.match(text):
                continue
            window = text
            if i + 1 < len(lines) and lines[i + 1][0] == "+":
                window += "\n" + lines[i + 1][1]
            hits = [lit for lit in _literals(window) if lit in example]
            if len(hits) >= 2:
                found += hits
    return found


def _kept_as_comments(f: FileDiff) -> int:
    """Added comment lines that repeat a line the same hunk removed, not already marked:
    replaced code kept as a comment."""
    kept = 0
    for h in f.hunks:
        marked = {i for i, _ in h.line_markers}
        removed = {" ".join(text.split()) for kind, text in h.lines if kind == "-" and text.strip()}
        for i, (kind, text) in enumerate(h.lines):
            m = _COMMENT_RE.match(text) if kind == "+" and i not in marked else None
            if m and m.group(1).strip() and " ".join(m.group(1).split()) in removed:
                kept += 1
    return kept


def _count(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return max(int(value), 0)
