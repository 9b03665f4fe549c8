"""Parsed, highlighted patches for the group page, cached in-process.

A patch is parsed once (``grading.diffs.parse_patch``) and each file rendered
once to HTML with Pygments, then kept in an LRU keyed by a digest of the
patch text, so identical patches across trajectories and repeated page
views cost nothing. Rendering is capped (lines per file, lines per patch,
characters per line): a 100,000-line patch shows its first lines and a link
that pages through the rest (``file_rows``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlencode

from django.urls import reverse
from pygments.lexers import get_lexer_for_filename
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from grading.diffs import BINARY, LARGE_FILE, MARKER_LABELS, STRAY_FILE, FileDiff, Hunk, ParsedPatch, parse_patch
from webapp.review.text import escape

FILE_LINES = 300  # lines of one file shown before "load the rest"
PATCH_LINES = 1500  # lines of one patch shown on the group page, all files together
HUNK_OPEN_LINES = 60  # longer hunks start collapsed and load when opened
LINE_CHARS = 1000  # characters of one line shown; the raw patch has the rest
PAGE_LINES = 2000  # lines per "load the rest" page
CACHE_BYTES = 256 * 1024 * 1024  # rough budget of the patch cache

# Class names that no Pygments token class uses (those are short: "c", "dl", ...).
PYGMENTS_STYLE = "default"  # static/css/pygments.css is generated from the same style
_STYLE = get_style_by_name(PYGMENTS_STYLE)
# Cached HTML is shared by every trajectory with the same patch; links in it
# carry this mark where the trajectory's pk goes. Escaped data never holds "<".
PK_MARK = "<!--trajectory-->"

SIGN_CLASS = {"+": "add", "-": "del", " ": "ctx"}


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# --- highlighting ------------------------------------------------------------------

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


def highlight(path: str, texts: list[str]) -> list[str]:
    """One escaped, highlighted HTML fragment per line of `texts`.

    The lines of a hunk are lexed together (a string or comment spanning lines
    stays one token) and split back at newlines; if the lexer does not give
    back the same number of lines, the lines are only escaped."""
    lexer = lexer_for(path)
    if lexer is None or not texts:
        return [escape(t) for t in texts]
    # Pygments turns a lone \r into a newline; keep the line count exact.
    source = "\n".join(t.replace("\r", "\u240d") for t in texts)
    lines: list[list[str]] = [[]]
    current, run = "", []  # adjacent tokens of one class share a span

    def flush():
        if run:
            text = escape("".join(run))
            lines[-1].append(f'<span class="{current}">{text}</span>' if current else text)
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
    if len(lines) != len(texts):
        return [escape(t) for t in texts]
    return ["".join(parts) for parts in lines]


# --- one file -----------------------------------------------------------------------

def marker_badges(markers) -> str:
    return "".join(
        f'<span class="badge mk mk-{m}" title="{escape(MARKER_LABELS.get(m, m))}">{escape(m)}</span>'
        for m in sorted(markers)
    )


def _render_lines(path: str, hunk: Hunk, start: int, stop: int) -> str:
    lines = hunk.lines[start:stop]
    texts, cut = [], []
    for _, text in lines:
        cut.append(max(0, len(text) - LINE_CHARS))
        texts.append(text[:LINE_CHARS])
    html = highlight(path, texts)
    flags = dict(hunk.line_markers)
    numbers = hunk.line_numbers()[start:stop]
    out = []
    for i, ((kind, _), body, (old, new), more) in enumerate(zip(lines, html, numbers, cut, strict=True)):
        cls = SIGN_CLASS[kind]
        flag = flags.get(start + i)
        attrs = f' title="{escape(MARKER_LABELS.get(flag, flag))}"' if flag else ""
        tail = f'<span class="cut">… {more} more characters</span>' if more else ""
        # two gutters, drawn by CSS from these attributes so copied code carries no numbers
        out.append(f'<span class="ln {cls}{" flag" if flag else ""}" data-o="{"" if old is None else old}" '
                   f'data-n="{"" if new is None else new}"{attrs}>{body}{tail}</span>')
    return "".join(out)


def _hunk_summary(hunk: Hunk) -> str:
    return (f'<span class="hh">{escape(hunk.header)}</span>'
            f'<span class="counts"><span class="plus">+{hunk.added}</span> '
            f'<span class="minus">−{hunk.removed}</span></span>{marker_badges(hunk.markers)}')


def hunks_html(path: str, hunks) -> str:
    """Every line of `hunks` as open blocks, highlighted for `path`: for output
    that is already bounded, such as an interdiff."""
    return "".join(f'<details class="hunk{" marked" if h.markers else ""}" open><summary>{_hunk_summary(h)}'
                   f'</summary><pre class="code hl" hx-disable>{_render_lines(path, h, 0, len(h.lines))}</pre>'
                   "</details>" for h in hunks)


@dataclass
class FileView:
    """One file of one patch as the group page shows it. ``html`` is safe
    markup (escaped by us); ``more_from`` is the row offset of the first row
    not shown, None when all is shown."""

    diff: FileDiff
    html: str
    rows: int
    more_from: int | None
    shown: int = 0

    def html_for(self, trajectory_pk: int) -> str:
        return self.html.replace(PK_MARK, str(trajectory_pk)) if PK_MARK in self.html else self.html

    @property
    def badges(self) -> str:
        return marker_badges(self.diff.markers)


def file_row_count(f: FileDiff) -> int:
    """Rows of a file: one per hunk header plus one per line."""
    return sum(1 + len(h.lines) for h in f.hunks)


def _rows_url(path: str, start: int, count: int) -> str:
    """The escaped URL of rows of a file, with PK_MARK for the trajectory."""
    before, after = reverse("patch_file", args=[0]).split("/0/", 1)
    query = urlencode({"path": path, "start": start, "count": count})
    return f"{escape(before)}/{PK_MARK}/{escape(after)}?{escape(query)}"


def render_file(f: FileDiff, budget: int, lazy: bool = True) -> FileView:
    """Hunks of `f` as collapsible blocks, at most min(budget, FILE_LINES) lines.
    With `lazy`, a hunk longer than HUNK_OPEN_LINES starts closed and empty, and
    loads its lines when opened (or, without JavaScript, links to them); a hunk
    too long to load at once shows its first lines and pages through the rest."""
    limit = min(budget, FILE_LINES)
    rows = file_row_count(f)
    out, shown, offset = [], 0, 0
    more_from = None
    for hunk in f.hunks:
        size = len(hunk.lines)
        marked = " marked" if hunk.markers else ""
        summary = f'<summary>{_hunk_summary(hunk)}<span class="len">{size} lines</span></summary>'
        if lazy and HUNK_OPEN_LINES < size <= PAGE_LINES:
            url = _rows_url(f.path, offset + 1, size)
            out.append(f'<details class="hunk lazy{marked}" hx-get="{url}" hx-trigger="toggle once" '
                       f'hx-target="find pre" hx-swap="innerHTML">{summary}<pre class="code hl" hx-disable>'
                       f'<span class="ln hdr"><a href="{url}">Show these {size} lines</a></span></pre></details>')
            offset += 1 + size
            continue
        if shown >= limit:
            more_from = offset
            break
        take = min(size, limit - shown)
        is_open = " open" if size <= HUNK_OPEN_LINES or take < size else ""
        out.append(f'<details class="hunk{marked}"{is_open}>{summary}'
                   f'<pre class="code hl" hx-disable>{_render_lines(f.path, hunk, 0, take)}</pre></details>')
        shown += take
        if take < size:
            more_from = offset + 1 + take
            break
        offset += 1 + size
    return FileView(diff=f, html="".join(out), rows=rows, more_from=more_from, shown=shown)


def file_rows(f: FileDiff, start: int, count: int = PAGE_LINES) -> tuple[str, int | None]:
    """Rows `start`..`start+count` of `f` (hunk headers and lines) as one safe
    <pre> body, and the offset of the next page (None at the end)."""
    out, offset, end = [], 0, start + count
    for hunk in f.hunks:
        size = 1 + len(hunk.lines)
        if offset + size <= start:
            offset += size
            continue
        if offset >= end:
            break
        if offset >= start:
            out.append(f'<span class="ln hdr">{escape(hunk.header)}</span>')
        first = max(0, start - offset - 1)
        last = min(len(hunk.lines), end - offset - 1)
        if last > first:
            out.append(_render_lines(f.path, hunk, first, last))
        offset += size
    total = file_row_count(f)
    return "".join(out), (end if end < total else None)


# --- one patch ----------------------------------------------------------------------

@dataclass
class PatchView:
    key: str
    text: str
    parsed: ParsedPatch
    files: dict[str, FileView] = field(default_factory=dict)
    size: int = 0

    @property
    def error(self) -> str | None:
        return self.parsed.error


def _budget_order(f: FileDiff):
    return (bool(f.markers & {STRAY_FILE, LARGE_FILE, BINARY}), f.added + f.removed)


def build_patch_view(text: str, key: str, lazy: bool = True) -> PatchView:
    parsed = parse_patch(text)
    view = PatchView(key=key, text=text, parsed=parsed)
    # The line budget goes to the change itself first: small files before big
    # ones, leftovers (build output, stray scripts, huge files) last.
    budget = PATCH_LINES
    rendered = {}
    for f in sorted(parsed.files, key=_budget_order):
        if f.path not in rendered:
            rendered[f.path] = render_file(f, budget, lazy)
            budget = max(0, budget - rendered[f.path].shown)
    view.files = {f.path: rendered[f.path] for f in parsed.files if f.path in rendered}
    view.size = 3 * len(text) + sum(len(fv.html) for fv in view.files.values())
    return view


class _LRU:
    """A thread-safe LRU bounded by the summed ``size`` of its values."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.items: OrderedDict[str, PatchView] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> PatchView | None:
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key: str, value: PatchView) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = value
            self.bytes += value.size
            while self.bytes > self.max_bytes and len(self.items) > 1:
                _, old = self.items.popitem(last=False)
                self.bytes -= old.size

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.bytes = 0


_views = _LRU(CACHE_BYTES)
_digests: OrderedDict[str, str] = OrderedDict()  # trajectory content_hash -> patch digest
_digests_lock = threading.Lock()


def patch_view(text: str, key: str | None = None, lazy: bool = True) -> PatchView:
    """The cached view of `text` (`key`, its digest, when the caller has it).
    Not `lazy`: every hunk rendered, for patches shown without a trajectory."""
    key = (key or digest(text)) + ("" if lazy else ":eager")
    view = _views.get(key)
    if view is None:
        view = build_patch_view(text, key, lazy)
        _views.put(key, view)
    return view


def cached_view_for_hash(content_hash: str) -> PatchView | None:
    """The view of a trajectory's patch, from its content hash, if cached."""
    with _digests_lock:
        key = _digests.get(content_hash)
    return _views.get(key) if key else None


def remember(content_hash: str, text: str) -> PatchView:
    key = digest(text)
    with _digests_lock:
        _digests[content_hash] = key
        _digests.move_to_end(content_hash)
        while len(_digests) > 100_000:
            _digests.popitem(last=False)
    return patch_view(text, key)


def clear_caches() -> None:
    _views.clear()
    with _digests_lock:
        _digests.clear()
