"""Parsed, highlighted patches for the group page, cached in-process.

A patch is parsed once (``grading.diffs.parse_patch``) and each file rendered
once to HTML with Pygments, then kept in an LRU keyed by a digest of the
patch text, so identical patches across trajectories and repeated page
views cost nothing. Rendering is capped (lines per file, lines per patch,
characters per line): a 100,000-line patch shows its first lines and a link
that pages through the rest (``file_rows``). Lines are highlighted
(``highlight``) and, inside paired removed and added lines, what changed is
marked (``worddiff``).

A view holds what the group page needs of a patch (its files without their
hunks, the rendered HTML, the key of its change for equivalence classes):
``webapp.html.renders`` keeps that in the database, so that a patch is
parsed and highlighted once for every web process.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from django.urls import reverse

from grading.diffs import (
    BINARY,
    LARGE_FILE,
    MARKER_LABELS,
    STRAY_FILE,
    FileDiff,
    Hunk,
    ParsedPatch,
    change_key,
    parse_patch,
)
from webapp.html.highlight import highlight
from webapp.html.text import escape
from webapp.html.worddiff import line_marks

# Bump whenever the HTML a patch renders to changes (markup, caps, highlighting):
# renders stored under another version are made again.
RENDERER_VERSION = 2

FILE_LINES = 300  # lines of one file shown before "load the rest"
PATCH_LINES = 1500  # lines of one patch shown on the group page, all files together
HUNK_OPEN_LINES = 60  # longer hunks start collapsed and load when opened
LINE_CHARS = 1000  # characters of one line shown; the raw patch has the rest
PAGE_LINES = 2000  # lines per "load the rest" page
CACHE_BYTES = 256 * 1024 * 1024  # rough budget of the patch cache

# Cached HTML is shared by every trajectory with the same patch; links in it
# carry this mark where the trajectory's pk goes. Escaped data never holds "<".
PK_MARK = "<!--trajectory-->"

SIGN_CLASS = {"+": "add", "-": "del", " ": "ctx"}


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


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
    # Pairs are found over the whole hunk, so that a page boundary does not split one.
    marks = line_marks([kind for kind, _ in hunk.lines], [text for _, text in hunk.lines], range(start, stop))
    html = highlight(path, texts, {i - start: found for i, found in marks.items() if start <= i < stop})
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
class RenderedFile:
    """One file of one patch as the group page shows it. ``diff`` is the file's
    parse without its hunks (status, counts, markers: what the page says of it;
    ``RenderedPatch.file_diff`` has the hunks), ``index`` its place in the patch's
    files. ``html`` is safe markup (escaped by us); ``more_from`` is the row
    offset of the first row not shown, None when all is shown."""

    diff: FileDiff
    html: str
    rows: int
    more_from: int | None
    shown: int = 0
    index: int = 0

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


def hunk_anchor(trajectory_pk: int | str, path: str, index: int) -> str:
    """The id of a trajectory's hunk on the group page (what search hits link to):
    the `index`th hunk of file `path`."""
    return f"hunk-{trajectory_pk}-{digest(path)[:12]}-{index}"


def render_file(f: FileDiff, budget: int, lazy: bool = True) -> RenderedFile:
    """Hunks of `f` as collapsible blocks, at most min(budget, FILE_LINES) lines.
    With `lazy`, a hunk longer than HUNK_OPEN_LINES starts closed and empty, and
    loads its lines when opened (or, without JavaScript, links to them); a hunk
    too long to load at once shows its first lines and pages through the rest."""
    limit = min(budget, FILE_LINES)
    rows = file_row_count(f)
    out, shown, offset = [], 0, 0
    more_from = None
    for index, hunk in enumerate(f.hunks):
        size = len(hunk.lines)
        marked = " marked" if hunk.markers else ""
        # only a trajectory's hunks (lazy ones) have an id: a reference patch has no pk to put in it
        anchor = f' id="{hunk_anchor(PK_MARK, f.path, index)}"' if lazy else ""
        summary = f'<summary>{_hunk_summary(hunk)}<span class="len">{size} lines</span></summary>'
        if lazy and HUNK_OPEN_LINES < size <= PAGE_LINES:
            url = _rows_url(f.path, offset + 1, size)
            out.append(f'<details class="hunk lazy{marked}" hx-get="{url}" hx-trigger="toggle once" '
                       f'hx-target="find pre" hx-swap="innerHTML"{anchor}>{summary}<pre class="code hl" hx-disable>'
                       f'<span class="ln hdr"><a href="{url}">Show these {size} lines</a></span></pre></details>')
            offset += 1 + size
            continue
        if shown >= limit:
            more_from = offset
            break
        take = min(size, limit - shown)
        is_open = " open" if size <= HUNK_OPEN_LINES or take < size else ""
        out.append(f'<details class="hunk{marked}"{anchor}{is_open}>{summary}'
                   f'<pre class="code hl" hx-disable>{_render_lines(f.path, hunk, 0, take)}</pre></details>')
        shown += take
        if take < size:
            more_from = offset + 1 + take
            break
        offset += 1 + size
    return RenderedFile(diff=f, html="".join(out), rows=rows, more_from=more_from, shown=shown)


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
class RenderedPatch:
    """A patch as the group page shows it. ``parsed`` is its parse without the
    hunks (files, counts, markers, error), ``files`` its rendered files by path,
    ``change`` a digest of what makes two patches the same change
    (``grading.diffs.change_key``). The group page needs no hunks: ``full``
    parses the text again when they are asked for, if this view came from bytes."""

    key: str
    text: str
    parsed: ParsedPatch
    change: str
    files: dict[str, RenderedFile] = field(default_factory=dict)
    size: int = 0
    _full: ParsedPatch | None = field(default=None, repr=False)

    @property
    def error(self) -> str | None:
        return self.parsed.error

    @property
    def full(self) -> ParsedPatch:
        """The whole parse, hunks included."""
        if self._full is None:
            self._full = parse_patch(self.text)
        return self._full

    def file_diff(self, path: str) -> FileDiff | None:
        """The rendered file at `path`, hunks included; None if the patch has no such file."""
        fv = self.files.get(path)
        return None if fv is None else self.full.files[fv.index]


def render_key(patch_digest: str, lazy: bool) -> str:
    return patch_digest + ("" if lazy else ":eager")


def _budget_order(f: FileDiff):
    return (bool(f.markers & {STRAY_FILE, LARGE_FILE, BINARY}), f.added + f.removed)


def _outline(f: FileDiff) -> FileDiff:
    return replace(f, hunks=())


def size_of(text: str, files: dict[str, RenderedFile]) -> int:
    """What a view costs in memory, roughly: the text, its parse, the HTML."""
    return 3 * len(text) + sum(len(fv.html) for fv in files.values())


def render_patch(text: str, key: str, lazy: bool = True) -> RenderedPatch:
    parsed = parse_patch(text)
    # The line budget goes to the change itself first: small files before big
    # ones, leftovers (build output, stray scripts, huge files) last.
    budget = PATCH_LINES
    rendered: dict[str, RenderedFile] = {}
    for i in sorted(range(len(parsed.files)), key=lambda i: _budget_order(parsed.files[i])):
        f = parsed.files[i]
        if f.path not in rendered:
            fv = render_file(f, budget, lazy)
            rendered[f.path] = replace(fv, diff=_outline(f), index=i)
            budget = max(0, budget - fv.shown)
    files = {f.path: rendered[f.path] for f in parsed.files if f.path in rendered}
    outline = ParsedPatch(files=tuple(_outline(f) for f in parsed.files), error=parsed.error)
    return RenderedPatch(key=key, text=text, parsed=outline, change=digest(repr(change_key(parsed, text))),
                     files=files, size=size_of(text, files), _full=parsed)


class _LRU:
    """A thread-safe LRU bounded by the summed ``size`` of its values."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.items: OrderedDict[str, RenderedPatch] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> RenderedPatch | None:
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key: str, value: RenderedPatch) -> None:
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


def cached_view(key: str) -> RenderedPatch | None:
    return _views.get(key)


def keep(view: RenderedPatch) -> None:
    _views.put(view.key, view)


def cached_view_for_hash(content_hash: str) -> RenderedPatch | None:
    """The view of a trajectory's patch, from its content hash, if cached."""
    with _digests_lock:
        key = _digests.get(content_hash)
    return _views.get(key) if key else None


def remember(content_hash: str, view: RenderedPatch) -> None:
    """Keep the view of a trajectory's patch, found again by its content hash."""
    with _digests_lock:
        _digests[content_hash] = view.key
        _digests.move_to_end(content_hash)
        while len(_digests) > 100_000:
            _digests.popitem(last=False)
    keep(view)


def clear_caches() -> None:
    _views.clear()
    with _digests_lock:
        _digests.clear()
