"""What changed inside a line, as GitHub and diff-so-fancy show it.

In a hunk, a run of removed lines directly followed by a run of added lines
is a replacement: the i-th removed line is paired with the i-th added one,
the two are compared token by token (words, runs of spaces, single
punctuation characters) and the character ranges that differ are returned
for the diff view to mark. Plain functions over strings, no markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

# Every character falls in one of the three alternatives: the tokens of a line join back to it.
TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
MIN_SIMILARITY = 0.5  # below this a pair is a rewrite: marking nearly every word would say nothing
MAX_TOKENS = 500  # longer lines are shown unmarked: the matcher is quadratic in the worst case

Range = tuple[int, int]  # [start, stop) character offsets into one line


def pairs(kinds: Sequence[str]) -> list[tuple[int, int]]:
    """(removed index, added index) of the lines to compare, from the kinds (" ", "-", "+")
    of a hunk's lines: in each run of "-" directly followed by a run of "+", the i-th of
    one with the i-th of the other; the longer run's extra lines have no partner."""
    out, i, n = [], 0, len(kinds)
    while i < n:
        if kinds[i] != "-":
            i += 1
            continue
        start = i
        while i < n and kinds[i] == "-":
            i += 1
        added = i
        while i < n and kinds[i] == "+":
            i += 1
        out.extend(zip(range(start, added), range(added, i), strict=False))  # runs of unequal length
    return out


def _offsets(tokens: list[str]) -> list[int]:
    out, at = [0], 0
    for token in tokens:
        at += len(token)
        out.append(at)
    return out


def changed_ranges(old: str, new: str) -> tuple[list[Range], list[Range]] | None:
    """The character ranges of `old` and of `new` that differ, in order and disjoint;
    None when the lines are too different, or too long, for marks to help."""
    a, b = TOKEN.findall(old), TOKEN.findall(new)
    if len(a) > MAX_TOKENS or len(b) > MAX_TOKENS:
        return None
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < MIN_SIMILARITY:
        return None
    at_a, at_b = _offsets(a), _offsets(b)
    old_ranges: list[Range] = []
    new_ranges: list[Range] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            old_ranges.append((at_a[i1], at_a[i2]))
        if j2 > j1:
            new_ranges.append((at_b[j1], at_b[j2]))
    return old_ranges, new_ranges


def line_marks(kinds: Sequence[str], texts: Sequence[str], within: range | None = None) -> dict[int, list[Range]]:
    """Changed ranges by line index, for the paired lines of one hunk that have any;
    with `within`, only for pairs with a line in it (one page of a long hunk)."""
    marks: dict[int, list[Range]] = {}
    for old, new in pairs(kinds):
        if within is not None and old not in within and new not in within:
            continue
        found = changed_ranges(texts[old], texts[new])
        if found is None:
            continue
        if found[0]:
            marks[old] = found[0]
        if found[1]:
            marks[new] = found[1]
    return marks
