"""How two changes to the same files differ: what patchutils' ``interdiff`` computes.

Both patches were made against one base we do not have. Each hunk shows the
base lines it covers (its context and removed lines), so per file the base
regions either patch touches can be rebuilt from the two patches together.
Each patch is applied to those regions and the two results are diffed: the
output is the change that turns A's file into B's, numbered in A's file
(old side) and B's file (new side). Two fixes that touch different places
show only their own changed lines, never each other's hunk headers or context.

When the patches disagree about a base line (they were not made against the
same file) or a patch's own hunks overlap, the file cannot be reconciled and
says so instead of guessing.
"""

from __future__ import annotations

import difflib
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from grading.diffs import BINARY, FileDiff, Hunk, ParsedPatch, files_by_path, parse_patch

ONLY_A, ONLY_B, SAME, DIFFERS, UNRECONCILED = "only_a", "only_b", "same", "differs", "unreconciled"
CONTEXT = 3  # lines of context around each change, as diff -u
DIFF_INPUT_CAP = 3000  # lines per side of one region handed to difflib, which is superlinear


@dataclass(frozen=True)
class FileInterdiff:
    """How B's change to ``path`` differs from A's.

    ``hunks``: for "differs", the diff from A's file to B's (source side = A's
    line numbers, target side = B's); for "only_a"/"only_b", that side's own
    hunks; empty for "same" and "unreconciled". ``note`` says why a file could
    not be compared, or how the two sides' kind of change differs (a rename on
    one side only, say). ``truncated``: lines were left out to bound the output.
    """

    path: str
    status: str
    hunks: tuple[Hunk, ...] = ()
    note: str | None = None
    truncated: bool = False

    @property
    def lines(self) -> tuple[str, ...]:
        """The same as unified diff text, for readers of plain text (the agentic grader)."""
        out = [self.note] if self.note else []
        if self.status == DIFFERS and self.hunks:
            out += [f"--- A/{self.path}", f"+++ B/{self.path}"]
        for h in self.hunks:
            out.append(h.header)
            out.extend(kind + text for kind, text in h.lines)
        return tuple(out)


class Unreconciled(Exception):
    """The two patches cannot both apply to one base file."""


@dataclass(frozen=True)
class _Span:
    """Where one hunk sits in the base: ``base`` lines from ``start`` (1-based;
    for a pure insertion, the base line it goes before) become ``result``."""

    start: int
    base: tuple[str, ...]
    result: tuple[str, ...]

    @property
    def end(self) -> int:
        return self.start + len(self.base)


def _spans(f: FileDiff) -> list[_Span]:
    spans = []
    for h in f.hunks:
        base = tuple(text for kind, text in h.lines if kind != "+")
        result = tuple(text for kind, text in h.lines if kind != "-")
        # "@@ -10,0 +11,2 @@" inserts after base line 10, and "@@ -0,0 +1,3 @@" before line 1
        spans.append(_Span(h.source_start if base else h.source_start + 1, base, result))
    spans.sort(key=lambda s: s.start)
    for before, after in zip(spans, spans[1:], strict=False):
        if after.start < before.end:
            raise Unreconciled(f"hunks of one patch overlap at line {after.start} of the original")
    return spans


def _known_base(spans_a: list[_Span], spans_b: list[_Span]) -> dict[int, str]:
    """Every base line either patch shows, checked to read the same in both."""
    known: dict[int, str] = {}
    for s in spans_a:
        known.update(zip(range(s.start, s.end), s.base, strict=True))
    for s in spans_b:
        for n, text in zip(range(s.start, s.end), s.base, strict=True):
            if known.setdefault(n, text) != text:
                raise Unreconciled(f"the patches were not made against the same file: line {n} "
                                   "of the original reads differently in each")
    return known


def _regions(spans: list[_Span]) -> list[tuple[int, int]]:
    """Base ranges [start, end) covered by spans, overlapping or touching ones joined."""
    out: list[list[int]] = []
    for s in sorted(spans, key=lambda s: (s.start, s.end)):
        if out and s.start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], s.end)
        else:
            out.append([s.start, s.end])
    return [(start, end) for start, end in out]


def _by_region(regions: list[tuple[int, int]], spans: list[_Span]) -> list[list[_Span]]:
    """`spans` (in order) split by the region each lies in."""
    starts = [start for start, _ in regions]
    out: list[list[_Span]] = [[] for _ in regions]
    for s in spans:
        out[bisect_right(starts, s.start) - 1].append(s)
    return out


def _apply(known: dict[int, str], start: int, end: int, spans: list[_Span]) -> list[str]:
    """Base lines start..end with `spans` (all inside the range, in order) applied."""
    out, n = [], start
    for s in spans:
        out.extend(known[i] for i in range(n, s.start))
        out.extend(s.result)
        n = s.end
    out.extend(known[i] for i in range(n, end))
    return out


def _header(old_start: int, old_len: int, new_start: int, new_len: int) -> str:
    # as diff -u writes it: an empty side names the line before the gap
    return (f"@@ -{old_start if old_len else old_start - 1},{old_len} "
            f"+{new_start if new_len else new_start - 1},{new_len} @@")


def _diff_hunks(left: list[str], right: list[str], old_first: int, new_first: int) -> Iterator[Hunk]:
    """Hunks turning `left` (numbered from `old_first`) into `right` (from `new_first`)."""
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        lines: list[tuple[str, str]] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend((" ", text) for text in left[i1:i2])
                continue
            lines.extend(("-", text) for text in left[i1:i2])
            lines.extend(("+", text) for text in right[j1:j2])
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        old_start, new_start = old_first + i1, new_first + j1
        added = sum(kind == "+" for kind, _ in lines)
        removed = sum(kind == "-" for kind, _ in lines)
        yield Hunk(header=_header(old_start, i2 - i1, new_start, j2 - j1), source_start=old_start,
                   target_start=new_start, lines=tuple(lines), added=added, removed=removed)


def file_interdiff(a: FileDiff, b: FileDiff) -> tuple[list[Hunk], bool]:
    """Hunks from A's version of the file to B's, and whether a region was too
    long to diff whole (then only its first DIFF_INPUT_CAP lines are compared).
    Raises Unreconciled when the two cannot apply to one base."""
    spans_a, spans_b = _spans(a), _spans(b)
    known = _known_base(spans_a, spans_b)
    hunks: list[Hunk] = []
    capped = False
    shift_a = shift_b = 0  # how far earlier regions moved A's and B's lines from the base's
    regions = _regions(spans_a + spans_b)
    for (start, end), in_a, in_b in zip(regions, _by_region(regions, spans_a), _by_region(regions, spans_b),
                                        strict=True):
        left, right = _apply(known, start, end, in_a), _apply(known, start, end, in_b)
        if left != right:
            capped = capped or max(len(left), len(right)) > DIFF_INPUT_CAP
            hunks.extend(_diff_hunks(left[:DIFF_INPUT_CAP], right[:DIFF_INPUT_CAP],
                                     start + shift_a, start + shift_b))
        shift_a += len(left) - (end - start)
        shift_b += len(right) - (end - start)
    return hunks, capped


def _same_change(a: FileDiff, b: FileDiff) -> bool:
    return (a.status == b.status != BINARY and a.old_path == b.old_path
            and [(h.source_start, h.lines) for h in a.hunks] == [(h.source_start, h.lines) for h in b.hunks])


def _kinds_note(a: FileDiff, b: FileDiff) -> str | None:
    if a.status == b.status and a.old_path == b.old_path:
        return None
    return f"A: {a.status} (from {a.old_path}); B: {b.status} (from {b.old_path})"


def _compare(a: FileDiff | None, b: FileDiff | None, path: str, room: bool) -> FileInterdiff:
    if b is None:
        return FileInterdiff(path, ONLY_A, a.hunks)
    if a is None:
        return FileInterdiff(path, ONLY_B, b.hunks)
    if BINARY in (a.status, b.status):
        return FileInterdiff(path, DIFFERS, note="binary file: contents cannot be compared")
    if _same_change(a, b):
        return FileInterdiff(path, SAME)
    if not room:  # the output is full: skip difflib's cost
        return FileInterdiff(path, DIFFERS, note="not compared: the interdiff is at its length limit",
                             truncated=True)
    note = _kinds_note(a, b)
    try:
        hunks, capped = file_interdiff(a, b)
    except Unreconciled as exc:
        return FileInterdiff(path, UNRECONCILED, note=f"cannot compare the changes: {exc}")
    status = DIFFERS if hunks or note else SAME
    return FileInterdiff(path, status, tuple(hunks), note, capped)


def _cut(hunks: tuple[Hunk, ...], limit: int) -> tuple[tuple[Hunk, ...], bool]:
    """At most `limit` lines of `hunks` (a hunk cut short keeps its header)."""
    out, left = [], limit
    for h in hunks:
        if left <= 0:
            return tuple(out), True
        if len(h.lines) > left:
            lines = h.lines[:left]
            out.append(Hunk(header=h.header, source_start=h.source_start, target_start=h.target_start,
                            lines=lines, added=sum(k == "+" for k, _ in lines),
                            removed=sum(k == "-" for k, _ in lines), markers=h.markers,
                            line_markers=tuple((i, m) for i, m in h.line_markers if i < left)))
            return tuple(out), True
        out.append(h)
        left -= len(h.lines)
    return tuple(out), False


def interdiff(patch_a: str | ParsedPatch, patch_b: str | ParsedPatch, *,
              max_file_lines: int = 400, max_total_lines: int = 4000) -> list[FileInterdiff]:
    """File by file, sorted by path, how B's change differs from A's; at most
    `max_file_lines` diff lines per file and `max_total_lines` in all."""
    files_a = files_by_path(patch_a if isinstance(patch_a, ParsedPatch) else parse_patch(patch_a))
    files_b = files_by_path(patch_b if isinstance(patch_b, ParsedPatch) else parse_patch(patch_b))
    budget = max_total_lines
    out = []
    for path in sorted(files_a.keys() | files_b.keys()):
        found = _compare(files_a.get(path), files_b.get(path), path, budget > 0)
        hunks, cut = _cut(found.hunks, min(max_file_lines, budget))
        budget -= sum(len(h.lines) for h in hunks)
        out.append(FileInterdiff(found.path, found.status, hunks, found.note, found.truncated or cut))
    return out
