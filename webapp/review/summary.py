"""The table of every trajectory of a paged group (webapp.review.columns): ROWS_PER_PAGE at a
time in the default order, each with its outcome, its place in the ranking the user may see
and the advantage it gives, its figures from the data, and where the matrix shows it.

Nothing here needs a patch parsed: the figures are the data's (turns, tokens) and the
patch's size as stored, so a page of the table costs the same deep in a group of 50,000
as at its head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webapp.review.columns import Choice, Window

ROWS_PER_PAGE = 100


@dataclass(frozen=True)
class SummaryRow:
    position: int  # 1-based, in the default order
    member: object  # review.selectors.Member
    advantage: dict | None  # its row of the group's advantages (webapp.advantages.chunks.ROW_FIELDS)
    turns: object
    tokens: object
    patch_chars: int | None
    shown: bool  # a column of the matrix now
    pinned: bool
    hidden: bool
    column_start: int | None  # the `cols` of the matrix page that shows it; None when pinned or hidden


@dataclass(frozen=True)
class SummaryPage:
    rows: list[SummaryRow]
    start: int
    stop: int
    total: int
    previous: int | None
    next: int | None


def summary_start(value) -> int:
    """The `rows` offset asked for, at a page's first row (0 when missing or not a number)."""
    value = str(value or "")
    start = int(value) if value.isascii() and value.isdigit() and len(value) < 10 else 0
    return start - start % ROWS_PER_PAGE


def summary_page(ordered: list, start: int, *, choice: Choice, window: Window, advantages: dict[str, dict],
                 read_facts: Callable[[list[int]], dict[int, tuple]]) -> SummaryPage:
    """The rows from the `start`-th of `ordered` (the group's members in the default order; a
    start past the end gives the last page); `read_facts(pks)`: (metrics, patch characters)
    by pk (review.selectors.trajectory_facts), asked for this page's rows only."""
    last = max(len(ordered) - 1, 0)
    start = min(start, last - last % ROWS_PER_PAGE)
    stop = min(start + ROWS_PER_PAGE, len(ordered))
    shown = set(window.pks)
    page = ordered[start:stop]
    facts = read_facts([m.pk for m in page])
    rest_index = {}  # place among the columns neither pinned nor hidden, as `window` pages them
    if page:
        wanted = {m.pk for m in page}
        index = 0
        for m in ordered:
            if m.pk in choice.pinned or m.pk in choice.hidden:
                continue
            if m.pk in wanted:
                rest_index[m.pk] = index
            index += 1
    rows = []
    for position, m in enumerate(page, start=start + 1):
        metrics, chars = facts.get(m.pk, ({}, None))
        metrics = metrics if isinstance(metrics, dict) else {}
        rows.append(SummaryRow(
            position=position, member=m, advantage=advantages.get(m.trajectory_id),
            turns=metrics.get("num_turns"), tokens=metrics.get("output_tokens", metrics.get("total_tokens")),
            patch_chars=chars, shown=m.pk in shown, pinned=m.pk in choice.pinned and m.pk not in choice.hidden,
            hidden=m.pk in choice.hidden,
            column_start=window.start_of(rest_index[m.pk]) if m.pk in rest_index else None))
    return SummaryPage(rows=rows, start=start, stop=stop, total=len(ordered),
                       previous=max(start - ROWS_PER_PAGE, 0) if start else None,
                       next=stop if stop < len(ordered) else None)
