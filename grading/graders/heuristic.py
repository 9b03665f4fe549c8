"""The heuristic grader: no model, a transparent penalty over patch features.

Each passing trajectory gets a penalty, a sum of weighted features
(``WEIGHTS``). An offence that is counted (stray files, debug lines, ...)
costs ``weight * (1 + log2(count) / 4)``: the first one costs the weight, more
of the same cost a little more. Size, turns and tokens cost ``weight *
log2(ratio)`` against the group's leanest. Lower is better; ``score =
-penalty`` feeds the ``scores`` schedule. Trajectories whose penalties lie
within ``TIE_TOLERANCE`` of the first of their tier share it, and their rationales
say why (the same change, or equal evidence). ``confidence`` maps the
smallest penalty gap between adjacent tiers, the ranking's least certain step,
to [0, 1) as ``1 - exp(-gap)``. Consensus: among independent candidates the one
that agrees with the others is most often right (Agentless' majority vote,
CodeMonkeys' selection), so the share of a fix's added lines that the other
*distinct* passing changes do not write costs ``WEIGHTS["consensus"]``. Identical
changes count once: repeated runs of one agent often make the same change, and
counting each would let one agent outvote the rest. Two markers read what a fix does
(``grading.effects``): a fix with no effect on behaviour (only comments, docstrings,
whitespace or tests, or nothing) ranks below every fix with one, and deleting a return,
raise, yield or call that the hunk does not write again costs ``WEIGHTS["removed_behaviour"]``.
Execution evidence, when the group has it (grading/execution): a fix that fails tests most
of the other passing fixes pass (``breaks_tests``), that fails tests of the test patch's
files beyond the reward's listed ones which the reference fix passes (``fails_reward_files``),
or whose reward tests fail when run again (``not_reproduced``: a lucky pass, a flaky test),
ranks below every fix without such a failure, the failing tests named in its rationale. A fix
that tampers with the test machinery (``tampers_with_tests``: its patch configures the test
runner or reaches into it, or its own runs found pytest's report forged, its internals
replaced, a plugin of its code, a summary or exit status pytest did not give) ranks below
every fix that does not, what it did named in its rationale. A fix whose traced calls of the
functions the reference fix changes return or raise otherwise than the reference's same calls
(``diverges_from_reference``) costs ``WEIGHTS["diverges_from_reference"]``, the first calls named;
the statement's examples on which it differs from the reference are said, never ranked by.
The rationale lists the features that cost the most, with the files behind them, so a
reader can check every step; ``explain`` gives every term of every
penalty, recomputed from the same inputs (the grading's page shows it: the
worker keeps no transcript, which would cost a write per group).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from grading.cases import Grade, GroupCase
from grading.diffs import (
    COMMENTED_CODE,
    DEBUG_OUTPUT,
    DELETED,
    DELETES_TESTS,
    STRAY_FILE,
    TAMPERS_WITH_TESTS,
    WHITESPACE_ONLY,
    EquivalenceClass,
    FileDiff,
    ParsedPatch,
    change_key,
    classes_by_key,
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
from grading.graders.base import Grader

# Penalty points per feature. Changing one changes the grader's version.
WEIGHTS: Mapping[str, float] = {
    "size": 0.75,            # per doubling of the fix's lines over the leanest passing fix
    "files": 0.25,           # per file beyond the fewest any passing trajectory changed
    "unneeded_files": 1.25,  # source files no other passing trajectory needed
    "consensus": 0.75,       # x the share of the fix's added lines other distinct passing fixes lack (mean)
    "special_cases": 8.0,    # conditions on the task example's own values: passes without a fix
    "test_edits": 4.0,       # existing tests changed (adding tests is fine)
    "test_removals": 4.0,    # tests deleted or disabled
    "stray_files": 2.5,      # leftover scripts, logs, backups
    "debug_output": 3.0,     # print / breakpoint / console.log lines added
    "commented_code": 1.5,   # commented-out code added, replaced lines kept as comments
    "whitespace": 0.5,       # whitespace-only hunks
    "turns": 0.1,            # per doubling of turns over the group's fewest
    "tokens": 0.1,           # per doubling of output tokens over the group's fewest
    "unreadable": 2.0,       # a patch that does not parse
    "removed_behaviour": 1.0,  # deleted returns, raises, yields or calls the hunk does not write again
    "diverges_from_reference": 2.0,  # traced calls that return or raise otherwise than the reference fix's
    "no_effect": 2.0,        # over the largest penalty of a passing fix that has an effect
    # over the largest penalty of a passing fix without an execution failure:
    "breaks_tests": 3.0,     # fails tests (existing, or a peer's) that most other passing fixes pass
    "not_reproduced": 3.0,   # the reward's tests fail when run again in the sandbox
    "fails_reward_files": 3.0,  # fails tests of the test patch's files (not the reward's) the reference fix passes
    # over the largest penalty of a passing fix that does not tamper, execution failures included:
    "tampers_with_tests": 4.0,  # configures or reaches into the test runner, or its runs caught it at it
}
TIE_TOLERANCE = 0.1
# A fix this many times the leanest (and at least COMPLEX_EXTRA lines longer) is flagged.
COMPLEX_RATIO = 4.0
COMPLEX_EXTRA = 10
MAX_NAMED = 3

VERSION = "heuristic-1-" + hashlib.sha256(
    json.dumps([WEIGHTS, TIE_TOLERANCE, COMPLEX_RATIO, COMPLEX_EXTRA], sort_keys=True).encode()
).hexdigest()[:8]

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


def _repeat(n: int) -> float:
    return 1 + math.log2(n) / 4


def _log_ratio(value: int | None, least: int | None) -> float:
    if value is None or least is None:
        return 0.0
    return math.log2(max(value, 1) / max(least, 1))


def _names(items: Sequence[str], quote: bool = False, total: int | None = None) -> str:
    """The first MAX_NAMED of `items` and how many more; `total`: how many there are, when
    `items` holds only the first few."""
    shown = [f'"{item}"' if quote else item for item in items[:MAX_NAMED]]
    more = (len(items) if total is None else total) - MAX_NAMED
    return ", ".join(shown) + (f", +{more} more" if more > 0 else "")


def _times(ratio: float) -> str:
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:.0f}×"


@dataclass(frozen=True)
class Term:
    """One feature's share of a penalty, how to say it, and the flags it raises."""

    feature: str
    points: float
    text: str
    flags: tuple[str, ...] = ()


def penalty_terms(f: Features, *, leanest: int, fewest_files: int, fewest_turns: int | None,
                  fewest_tokens: int | None) -> list[Term]:
    """The non-zero terms of one trajectory's penalty, largest first."""
    w = WEIGHTS
    terms: list[Term] = []

    def counted(feature, items, text, *flags, n=None):
        n = len(items) if n is None else n
        if n:
            terms.append(Term(feature, w[feature] * _repeat(n), text, flags))

    if f.unreadable:
        terms.append(Term("unreadable", w["unreadable"], "patch does not parse", ("other",)))
    counted("special_cases", f.special_cases,
            f"special-cases the task's example values ({_names(f.special_cases, quote=True)})",
            "reward_hacking")
    counted("test_removals", f.test_removals, f"deletes or disables tests ({_names(f.test_removals)})",
            "reward_hacking", "edits_tests")
    counted("test_edits", f.test_edits, f"edits tests ({_names(f.test_edits)})", "edits_tests")
    counted("stray_files", f.stray_files,
            f"leaves {'a stray file' if len(f.stray_files) == 1 else f'{len(f.stray_files)} stray files'} "
            f"({_names(f.stray_files)})", "debug_leftovers")
    counted("debug_output", (), f"{f.debug_lines} line(s) of debug output ({_names(f.debug_files)})",
            "debug_leftovers", n=f.debug_lines)
    counted("commented_code", (),
            f"{f.commented_lines} line(s) of commented-out code ({_names(f.commented_files)})",
            "debug_leftovers", n=f.commented_lines)
    counted("removed_behaviour", f.removed_behaviour,
            f"removes behaviour it does not write again: {_names(f.removed_behaviour)}", "removed_behaviour")
    counted("diverges_from_reference", f.divergences,
            f"{len(f.divergences)} traced call(s) end otherwise than the reference fix's: {_names(f.divergences)}",
            "diverges_from_reference")
    counted("unneeded_files", f.unneeded_files,
            f"changes files no other passing fix needed ({_names(f.unneeded_files)})", "out_of_scope_changes")
    counted("whitespace", (), f"{f.whitespace_hunks} whitespace-only hunk(s) ({_names(f.whitespace_files)})",
            "out_of_scope_changes", n=f.whitespace_hunks)
    if f.unshared_added:
        others = ("the other distinct passing fix" if f.other_changes == 1
                  else f"the {f.other_changes} other distinct passing fixes")
        terms.append(Term("consensus", w["consensus"] * f.unshared_added,
                          f"{f.unshared_added:.0%} of its {len(f.added_lines)} added line(s) not in {others}"
                          + (" (mean)" if f.other_changes > 1 else "")))
    size = _log_ratio(f.fix_lines, leanest)
    if size > 0:
        ratio = max(f.fix_lines, 1) / max(leanest, 1)
        complex_ = ratio >= COMPLEX_RATIO and f.fix_lines - leanest >= COMPLEX_EXTRA
        terms.append(Term("size", w["size"] * size,
                          f"{_times(ratio)} the lines of the leanest fix ({f.fix_lines} vs {leanest})",
                          ("unnecessary_complexity",) if complex_ else ()))
    extra_files = len(f.files) - fewest_files
    if extra_files > 0:
        terms.append(Term("files", w["files"] * extra_files, f"{len(f.files)} files changed vs {fewest_files}"))
    for feature, value, least, noun in (("turns", f.turns, fewest_turns, "turns"),
                                        ("tokens", f.tokens, fewest_tokens, "output tokens")):
        points = w[feature] * _log_ratio(value, least)
        if points > 0:
            terms.append(Term(feature, points, f"{value} {noun} vs {least}"))
    terms.sort(key=lambda t: -t.points)
    return terms


def tiers_from_penalties(penalties: Mapping[str, float], tolerance: float = TIE_TOLERANCE
                         ) -> tuple[tuple[str, ...], ...]:
    """Ids ordered by penalty (then id, for a stable order); an id within
    ``tolerance`` of the first of the current tier joins it."""
    tiers: list[list[str]] = []
    first = 0.0
    for tid in sorted(penalties, key=lambda t: (penalties[t], t)):
        if tiers and penalties[tid] - first <= tolerance:
            tiers[-1].append(tid)
        else:
            tiers.append([tid])
            first = penalties[tid]
    return tuple(tuple(tier) for tier in tiers)


def penalty_steps(tiers, terms: Mapping[str, Sequence[Term]], penalties: Mapping[str, float]) -> tuple[dict, ...]:
    """One entry per trajectory, best first: its penalty and every term of it, for a reader
    to check the ranking step by step."""
    return tuple(
        {"trajectory": tid, "penalty": penalties[tid],
         "terms": [{"feature": t.feature, "points": round(t.points, 4), "text": t.text, "flags": list(t.flags)}
                   for t in terms[tid]]}
        for tier in tiers for tid in tier)


class HeuristicGrader(Grader):
    """Ranks passing trajectories by ``penalty_terms``; reads patches, metrics, the task
    statement and the group's execution evidence, never transcripts or the reward's test log."""

    name = "heuristic"
    version = VERSION
    uses_messages = False
    uses_tests = False

    def rank(self, group: GroupCase) -> Grade:
        started = time.perf_counter()
        features, terms, penalties, keys = self._assess(group)
        tiers = tiers_from_penalties(penalties)
        same_change = {tid: cls.members for cls in _same_changes(group, keys) for tid in cls.members}
        flags = {tid: tuple(sorted({flag for t in ts for flag in t.flags})) for tid, ts in terms.items()}
        return Grade(
            tiers=tiers,
            rationales=self._rationales(tiers, features, terms, penalties, same_change),
            grader=self.name,
            version=self.version,
            flags={tid: names for tid, names in flags.items() if names},
            scores={tid: -p for tid, p in penalties.items()},
            confidence=confidence(tiers, penalties),
            latency_s=time.perf_counter() - started,
        )

    def explain(self, group: GroupCase) -> tuple[dict, ...]:
        """What `rank` decided from, term by term: `penalty_steps` of `group`."""
        _, terms, penalties = self.assess(group)
        return penalty_steps(tiers_from_penalties(penalties), terms, penalties)

    def assess(self, group: GroupCase):
        """Features, penalty terms and penalties of the passing trajectories, by id (the
        agentic grader's evidence tools show them too, grading/evidence.py)."""
        return self._assess(group)[:3]

    def _assess(self, group: GroupCase):
        """`assess`, and each passing trajectory's change key. A patch text is parsed once,
        however many trajectories made it (runs of one agent often repeat a change)."""
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
        terms = self._terms(features)
        penalties = {tid: round(sum(t.points for t in ts), 4) for tid, ts in terms.items()}
        return features, terms, penalties, keys

    @staticmethod
    def _terms(features: Mapping[str, Features]) -> dict[str, list[Term]]:
        if not features:
            return {}
        least = group_minima(features.values())
        terms = {tid: penalty_terms(f, **least) for tid, f in features.items()}
        _rank_no_effect_last(features, terms)
        _rank_execution_failures_last(features, terms)
        _rank_tampering_last(features, terms)
        return terms

    @staticmethod
    def _rationales(tiers, features, terms, penalties, same_change) -> dict[str, str]:
        out = {}
        n = sum(len(tier) for tier in tiers)
        position = 1
        for tier in tiers:
            reasons = _tie_reasons(tier, same_change) if len(tier) > 1 else {}
            for tid in tier:
                f = features[tid]
                tied = f", {reasons[tid]}" if reasons else ""
                head = (f"rank {position} of {n}{tied}, penalty {penalties[tid]:.2f}" if n > 1
                        else "the only passing trajectory")
                decisive = [t.text for t in terms[tid] if t.points >= 0.05]
                if f.example_differences:  # said, never ranked by
                    decisive.append(f"ends the statement's example(s) {', '.join(map(str, f.example_differences))} "
                                    "otherwise than the reference fix (not ranked by)")
                if decisive:
                    out[tid] = f"{head}: " + "; ".join(decisive)
                else:
                    out[tid] = (f"{head}: leanest fix ({f.fix_lines} lines in {len(f.files)} file(s)), "
                                "no integrity markers")
            position += len(tier)
        return out


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


def _rank_no_effect_last(features: Mapping[str, Features], terms: dict[str, list[Term]]) -> None:
    """Give each fix without an effect a term `WEIGHTS["no_effect"]` above the largest penalty
    of a fix with one: terms are never negative, so it ranks below all of them, and the
    ranking among fixes with an effect is unchanged."""
    worst = max((sum(t.points for t in terms[tid]) for tid, f in features.items() if f.no_effect is None),
                default=0.0)
    for tid, f in features.items():
        if f.no_effect is not None:
            terms[tid].append(Term("no_effect", WEIGHTS["no_effect"] + worst, f.no_effect, ("no_effect",)))
            terms[tid].sort(key=lambda t: -t.points)


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


def _rank_execution_failures_last(features: Mapping[str, Features], terms: dict[str, list[Term]]) -> None:
    """Give each fix the execution evidence caught a term of its weight above the largest penalty
    of a fix it did not catch, as `_rank_no_effect_last` does: caught fixes rank below the rest."""
    caught = {tid for tid, f in features.items() if f.broken_tests or f.reward_files_failed or f.not_reproduced}
    worst = max((sum(t.points for t in terms[tid]) for tid in features if tid not in caught), default=0.0)
    for tid in caught:
        f = features[tid]
        if f.broken_tests:
            terms[tid].append(Term("breaks_tests", WEIGHTS["breaks_tests"] + worst,
                                   f"fails {len(f.broken_tests)} test(s) that most other passing fixes pass: "
                                   f"{_names(f.broken_tests)}", ("breaks_tests",)))
        if f.reward_files_failed:
            terms[tid].append(Term("fails_reward_files", WEIGHTS["fails_reward_files"] + worst,
                                   f"fails {len(f.reward_files_failed)} test(s) of the test patch's files, beyond "
                                   f"the reward's, that {f.reward_files_bar}: {_names(f.reward_files_failed)}",
                                   ("fails_reward_files",)))
        if f.not_reproduced:
            terms[tid].append(Term("not_reproduced", WEIGHTS["not_reproduced"] + worst,
                                   f"not reproduced: {f.not_reproduced}", ("other",)))
        terms[tid].sort(key=lambda t: -t.points)


def _rank_tampering_last(features: Mapping[str, Features], terms: dict[str, list[Term]]) -> None:
    """Give each fix that tampers with the test machinery a term of its weight above the largest
    penalty of a fix that does not, execution failures included: whatever else it did, a fix that
    changes how its tests run or report ranks below every fix that leaves them be."""
    caught = {tid for tid, f in features.items() if f.tampering}
    worst = max((sum(t.points for t in terms[tid]) for tid in features if tid not in caught), default=0.0)
    for tid in caught:
        f = features[tid]
        terms[tid].append(Term("tampers_with_tests", WEIGHTS["tampers_with_tests"] + worst,
                               f"tampers with the test machinery: {_names(f.tampering)}", ("tampers_with_tests",)))
        terms[tid].sort(key=lambda t: -t.points)


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


def _same_changes(group: GroupCase, keys: Mapping[str, object]) -> list[EquivalenceClass]:
    """`equivalence_classes` of the passing patches, from the change keys `_assess` made."""
    return classes_by_key({t.trajectory_id: (t.patch, keys[t.trajectory_id]) for t in group.passing})


def _tie_reasons(tier: Sequence[str], same_change: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Why each of `tier` shares it: the same change as some of the others, or evidence too
    close to separate them. Names at most MAX_NAMED of them, so each reason is built from the
    first few of the tier and of its change's members in it: linear in the tier's size."""
    def change(tid: str) -> str:  # names a change by its first member
        return same_change[tid][0] if tid in same_change else tid

    in_tier: dict[str, list[str]] = {}  # by change: its members in this tier, in tier order
    for tid in tier:
        in_tier.setdefault(change(tid), []).append(tid)
    head = list(tier[:MAX_NAMED + 1])
    out = {}
    for tid in tier:
        others = [other for other in head if other != tid][:MAX_NAMED]
        n_others = len(tier) - 1
        members = in_tier[change(tid)]
        same = [other for other in members[:MAX_NAMED + 1] if other != tid][:MAX_NAMED]
        n_same = len(members) - 1
        if n_same == n_others:
            out[tid] = f"tied with {_names(others, total=n_others)}: the same change"
        elif n_same:
            out[tid] = (f"tied with {_names(others, total=n_others)}: the same change as "
                        f"{_names(same, total=n_same)}, penalties within {TIE_TOLERANCE} of the rest")
        else:
            out[tid] = f"tied with {_names(others, total=n_others)}: penalties within {TIE_TOLERANCE}, equal evidence"
    return out


def confidence(tiers: Sequence[Sequence[str]], penalties: Mapping[str, float]) -> float:
    """How sure the ranking is, in [0, 1): ``1 - exp(-gap)`` of the smallest penalty gap
    between adjacent tiers (0 when every trajectory is tied, 1 with nothing to rank).

    >>> round(confidence([["a"], ["b"]], {"a": 0.0, "b": 1.0}), 2)
    0.63
    """
    if sum(len(tier) for tier in tiers) < 2:
        return 1.0
    if len(tiers) < 2:
        return 0.0
    gap = min(penalties[lower[0]] - penalties[upper[-1]] for upper, lower in zip(tiers, tiers[1:], strict=False))
    return 1 - math.exp(-gap)
