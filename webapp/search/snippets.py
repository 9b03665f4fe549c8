"""Where a query matches an entry's text, and the snippet that shows it.

The text is untrusted: a snippet is built by escaping it and wrapping the
matches in <mark> (webapp.html.text.highlight_matches), never from markup
the database produced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grading.diffs import parse_patch
from webapp.html.text import highlight_matches

SNIPPET_CHARS = 160  # characters of the matching line shown, around the match


def matches(text: str, query: str) -> list[re.Match]:
    """The case-insensitive occurrences of `query` in `text`."""
    return list(re.finditer(re.escape(query), text, re.IGNORECASE))


def locate(text: str, query: str) -> tuple[int, int, int]:
    """Where the first case-insensitive occurrence of `query` in `text` starts and ends ((0, 0)
    when there is none), and how many occurrences `matches` finds. An ASCII text and query
    are folded with str.lower, a fifth of the time of `matches` over a long patch; only there
    does it fold as the regular expression does (which also matches "K" with the Kelvin sign)."""
    if text.isascii() and query.isascii():
        folded, needle = text.lower(), query.lower()
        start = folded.find(needle)
        return (start, start + len(needle), folded.count(needle)) if start >= 0 else (0, 0, 0)
    found = matches(text, query)
    return (found[0].start(), found[0].end(), len(found)) if found else (0, 0, 0)


def snippet(text: str, start: int, end: int, query: str) -> str:
    """Safe HTML: the line of `text` holding text[start:end], cut to about
    SNIPPET_CHARS around it, with the matches of `query` marked."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    before = max(line_start, min(start - SNIPPET_CHARS // 3, line_end - SNIPPET_CHARS))
    after = min(line_end, max(end, before + SNIPPET_CHARS))
    html = highlight_matches(text[before:after], query)
    return ("…" if before > line_start else "") + html + ("…" if after < line_end else "")


@dataclass(frozen=True)
class PatchPlace:
    """Where in a patch an offset lies: a file (path "" outside any parsed file),
    a hunk of it (None in the file's header lines), that hunk's header, and the
    hunk's first row in the file's rows (what the file page's `start` takes)."""

    path: str
    hunk: int | None
    header: str
    row: int


def patch_place(text: str, offset: int) -> PatchPlace:
    """The file and hunk of `text` (a patch) that holds character `offset`."""
    line_start = text.rfind("\n", 0, offset) + 1
    if text.startswith("diff --git ", line_start):
        section_start = line_start
    else:
        section_start = text.rfind("\ndiff --git ", 0, line_start) + 1  # 0 when there is none
    section_end = text.find("\ndiff --git ", line_start)
    section = text[section_start:len(text) if section_end < 0 else section_end + 1]
    files = parse_patch(section).files
    if not files:
        return PatchPlace(path="", hunk=None, header="", row=0)
    f = files[0]
    # Hunk headers are the lines that start with "@@", up to the offset's line: no
    # line of a hunk's body does (those start with " ", "+", "-" or "\").
    line = line_start - section_start  # the offset's line, in `section`
    headers = sum(1 for earlier in section[:line].split("\n") if earlier.startswith("@@"))
    headers += section.startswith("@@", line)
    if headers == 0 or headers > len(f.hunks):
        return PatchPlace(path=f.path, hunk=None, header="", row=0)
    index = headers - 1
    row = sum(1 + len(h.lines) for h in f.hunks[:index])
    return PatchPlace(path=f.path, hunk=index, header=f.hunks[index].header, row=row)
