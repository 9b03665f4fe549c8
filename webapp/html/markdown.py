"""Task statements: shown as written unless they are clearly Markdown.

Statements come from GitHub issues (Markdown) and from Trac and other
trackers (plain text). Rendering plain text as Markdown mangles it:
``__init__.py`` turns into a bold "init.py", a ``# Out:`` line in a traceback
into a heading, single line breaks vanish. Reading Markdown as plain text only
leaves its marks visible. So a statement is plain text unless it has a block
that plain text does not (``looks_like_markdown``), and the page offers the
other reading with a toggle either way.

Markdown comes from strangers: raw HTML off, then an nh3 allow-list.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

from webapp.html.text import reveal_bidi

MARKDOWN_CHARS = 200_000  # of a statement rendered as Markdown; the rest is shown as written

# GitHub shows a single line break in an issue as a break, and so do we.
_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)

_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code",
    "em", "strong", "del", "s", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr",
    "th", "td",
}
_ATTRIBUTES = {"a": {"href"}, "ol": {"start"}}

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# Two or more list items in a row with the same bullet ("- ", "* ") or numbered "1. ", "2. "; a diff's
# "- old" / "+ new" pair and Trac's "1) ... 2) ..." steps are not lists here.
_LIST = re.compile(r"^ {0,3}(?:([-*]) +\S[^\n]*\n {0,3}\1 +\S|\d{1,3}\. +\S[^\n]*\n {0,3}\d{1,3}\. +\S)",
                   re.MULTILINE)


def _has_fenced_code(text: str) -> bool:
    """An opening fence (```` ``` ```` or ``~~~``) and, on a later line, a closing one
    of the same character at least as long."""
    opened = None
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        if fence is None:
            continue
        if opened is None:
            opened = fence.group(1)
        elif (fence.group(1)[0] == opened[0] and len(fence.group(1)) >= len(opened)
              and not line.strip().strip(opened[0])):
            return True
    return False


def looks_like_markdown(text: str) -> bool:
    """Whether `text` has a fenced code block or a list: Markdown that plain text
    does not write by accident. Headings, emphasis and inline code are not
    enough (a ``# comment``, ``__init__`` or ``*args`` is as likely)."""
    return _has_fenced_code(text) or bool(_LIST.search(text))


@lru_cache(maxsize=512)
def render_markdown(text: str) -> str:
    """Safe HTML for `text`: links only http(s), no images, scripts, styles or attributes
    beyond the allow-list (so no `hx-*` or `on*` can come through)."""
    html = _md.render(text or "")
    return reveal_bidi(nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    ))


@dataclass(frozen=True)
class Statement:
    """A task statement both ways: ``text`` as written, ``markdown_html`` (safe)
    and ``markdown_rest`` (past MARKDOWN_CHARS, shown as written) as Markdown;
    ``is_markdown`` picks the reading shown first."""

    text: str
    is_markdown: bool
    markdown_html: str
    markdown_rest: str


def statement(text: str) -> Statement:
    text = text or ""
    return Statement(text=text, is_markdown=looks_like_markdown(text[:MARKDOWN_CHARS]),
                     markdown_html=render_markdown(text[:MARKDOWN_CHARS]), markdown_rest=text[MARKDOWN_CHARS:])
