"""Syntax highlighting of diff lines with Pygments, with the characters that
changed inside a line (``worddiff``) marked: escaped HTML, one fragment a line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from pygments.lexers import get_lexer_for_filename
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from webapp.html.text import escape
from webapp.html.worddiff import Range

PYGMENTS_STYLE = "default"  # static/css/pygments.css is generated from the same style
_STYLE = get_style_by_name(PYGMENTS_STYLE)


@lru_cache(maxsize=512)
def _lexer(key: str):
    try:
        lexer = get_lexer_for_filename(key, stripnl=False, stripall=False, ensurenl=True)
    except ClassNotFound:
        return None
    return None if lexer.name == "Text only" else lexer


def lexer_for(path: str):
    name = path.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1] if "." in name.strip(".") else ""
    return _lexer(f"x.{ext}" if ext else name)


@lru_cache(maxsize=1024)
def _token_class(ttype) -> str:
    """The CSS class of a token type, or "" when the style gives it no look (no span needed)."""
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    look = _STYLE.style_for_token(ttype)
    if STANDARD_TYPES[ttype] in ("w", "err") or not any(look[k] for k in ("color", "bold", "italic", "underline")):
        return ""
    return STANDARD_TYPES[ttype]


def _segments(path: str, texts: list[str]) -> list[list[tuple[str, str]]]:
    """Each line of `texts` as (CSS class, text) runs, "" for text with no look.

    The lines of a hunk are lexed together (a string or comment spanning lines
    stays one token) and split back at newlines; if the lexer does not give
    back the same number of lines, the lines come back as plain text."""
    lexer = lexer_for(path)
    if lexer is None or not texts:
        return [[("", t)] for t in texts]
    # Pygments turns a lone \r into a newline; keep the line count exact (one character for one).
    source = "\n".join(t.replace("\r", "\u240d") for t in texts)
    lines: list[list[tuple[str, str]]] = [[]]
    current, run = "", []  # adjacent tokens of one class share a span

    def flush():
        if run:
            lines[-1].append((current, "".join(run)))
            run.clear()

    for ttype, value in lexer.get_tokens(source):
        cls = _token_class(ttype)
        if cls != current:
            flush()
            current = cls
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                flush()
                lines.append([])
            if part:
                run.append(part)
    flush()
    if len(lines) == len(texts) + 1 and not lines[-1]:
        lines.pop()  # ensurenl's newline
    # the marks count characters: every line must come back whole
    if len(lines) != len(texts) or any(sum(len(t) for _, t in runs) != len(text)
                                       for runs, text in zip(lines, texts, strict=True)):
        return [[("", t)] for t in texts]
    return lines


def _line_html(segments: list[tuple[str, str]], marks: Sequence[Range]) -> str:
    """One line's runs as escaped HTML, the characters in `marks` in <mark>: inside the
    highlighting spans, so that the two nest (a mark across tokens is one per token)."""
    out, at, todo = [], 0, list(marks)
    for cls, text in segments:
        end = at + len(text)
        pieces, pos = [], at
        while todo and todo[0][0] < end:
            first, last = max(todo[0][0], pos), min(todo[0][1], end)
            if first > pos:
                pieces.append(escape(text[pos - at:first - at]))
            if last > first:
                pieces.append(f"<mark>{escape(text[first - at:last - at])}</mark>")
            pos = max(pos, last)
            if todo[0][1] > end:
                break
            todo.pop(0)
        if pos < end:
            pieces.append(escape(text[pos - at:]))
        inner = "".join(pieces)
        out.append(f'<span class="{cls}">{inner}</span>' if cls else inner)
        at = end
    return "".join(out)


def highlight(path: str, texts: list[str], marks: Mapping[int, Sequence[Range]] | None = None) -> list[str]:
    """One escaped, highlighted HTML fragment per line of `texts`, the ranges in
    `marks` (by line index) marked as changed."""
    marks = marks or {}
    return [_line_html(segments, marks.get(i, ())) for i, segments in enumerate(_segments(path, texts))]
