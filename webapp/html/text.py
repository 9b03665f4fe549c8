"""Escaping for untrusted text, with invisible direction controls made visible.

A U+202E (right-to-left override) in a file name or a code line can make
text read differently from what it is ("Trojan Source"); reviewers must see
it, so each such character is shown as a labelled mark instead.
"""

import html
import re

_BIDI_RE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _bidi_mark(match: re.Match) -> str:
    code = f"U+{ord(match.group()):04X}"
    return f'<span class="bidi" title="direction control {code}">{code}</span>'


def escape(text: str) -> str:
    """HTML for `text`: every markup character escaped, direction controls shown."""
    out = html.escape(text, quote=True)
    return _BIDI_RE.sub(_bidi_mark, out) if _BIDI_RE.search(out) else out


def reveal_bidi(html_text: str) -> str:
    """Show the direction controls in already-safe HTML whose tags carry no such
    character (our own markup and sanitised markdown)."""
    return _BIDI_RE.sub(_bidi_mark, html_text) if _BIDI_RE.search(html_text) else html_text


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters of `text` and how many were left out."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def highlight_matches(text: str, query: str) -> str:
    """Escaped `text` with case-insensitive occurrences of `query` in <mark>."""
    if not query:
        return escape(text)
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(escape(text[last:m.start()]))
        out.append(f"<mark>{escape(m.group())}</mark>")
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)
