"""The file matrix's body (files x trajectories) as HTML, built in Python.

A group of 16 trajectories over 80 files is 1,280 cells; through the
template engine each costs ~20 variable lookups, here a few string joins.
Every value from the data goes through `escape`; cached file HTML is
already safe.
"""

from urllib.parse import urlencode

from django.urls import reverse

from webapp.html.text import escape

UNIQUE_TITLE = "Only one passing trajectory touches this file"
UNIQUE_TITLE_SHOWN = "Only one passing trajectory of the columns shown touches this file"


def more_link(trajectory_pk: int, path: str, start: int, total: int) -> str:
    url = escape(f"{reverse('patch_file', args=[trajectory_pk])}?{urlencode({'path': path, 'start': start})}")
    label = (f"Load the rest ({total - start} more lines)" if start
             else f"Show this file ({total} lines; left out to keep the page fast)")
    return (f'<div class="more"><a href="{url}" hx-get="{url}" hx-target="closest .more" '
            f'hx-swap="outerHTML">{label}</a></div>')


def _file_head(cell) -> list[str]:
    d = cell.file.diff
    head = [f'<span class="status st-{escape(d.status)}">{escape(d.status)}</span>']
    if d.status == "renamed":
        head.append(f' <span class="muted mono">from {escape(d.old_path or "")}</span>')
    head.append(f' <span class="counts"><span class="plus">+{d.added}</span> '
                f'<span class="minus">−{d.removed}</span></span> ')
    if cell.unique:
        head.append('<span class="badge uniq">only here</span>')
    head.append(cell.file.badges)
    return head


def render_cell(cell) -> str:
    c, f = cell.column, cell.file
    classes = c.classes + (" unique" if cell.unique else "") + ("" if f else " blank")
    if f is None:
        return f'<td class="{classes}"></td>'
    if c.is_reference:
        return f'<td class="{classes}"><div class="file-head">{"".join(_file_head(cell))}</div>{_capped(f.html)}</td>'
    head = _file_head(cell)
    d = f.diff
    if c.same_as and c.same_kind == "identical":
        body = f'<div class="same-note">Identical to <b>{escape(c.same_as)}</b>.</div>'
    elif c.same_as:
        body = (f'<details class="same-note"><summary>Same as <b>{escape(c.same_as)}</b> up to whitespace'
                f'</summary>{cell.html}</details>')
    else:
        body = cell.html
        if f.more_from is not None:
            body += more_link(c.trajectory.pk, d.path, f.more_from, f.rows)
    return f'<td class="{classes}"><div class="file-head">{"".join(head)}</div>{_capped(body)}</td>'


def _capped(body: str) -> str:
    """A cell's diff under a cap (review.js adds "Show all" where it overflows): a long file in one
    column would otherwise stretch the row, and every short or blank cell beside it, to its length."""
    return f'<div class="cell-body cap">{body}</div>'


def render_body(rows, n_columns: int, *, paged: bool = False) -> str:
    """The rows of the matrix; `n_columns`: how many trajectories are shown; `paged`: they are
    a page of a larger group, what "unique" compares."""
    if not rows:
        return (f'<tr><th class="pin">No files</th><td class="empty" colspan="{n_columns}">'
                "No trajectory changed a file.</td></tr>")
    out = []
    for row in rows:
        classes = "file-row" + (" unique" if row.unique else "") + (" fail-only" if row.fail_only else "")
        title = UNIQUE_TITLE_SHOWN if paged else UNIQUE_TITLE
        badge = f' · <span class="badge uniq" title="{title}">unique to one passing</span>' if row.unique else ""
        out.append(f'<tr class="{classes}"><th class="pin path" scope="row"><div class="mono">{escape(row.path)}</div>'
                   f'<div class="muted small">{row.touched} of {n_columns}{badge}</div></th>')
        out.extend(render_cell(cell) for cell in row.cells)
        out.append("</tr>")
    return "".join(out)
