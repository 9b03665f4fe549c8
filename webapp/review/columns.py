"""The matrix's columns: which show, in what order, which are pinned, and the reference.

The default order is the group's final ranking as this user may see it
(`rankings.visible_ranking`: an annotator under blind review gets none, so
the order cannot leak the grader's), best first, ties by id; then the passing
trajectories it does not rank and the failing ones, each by id. Without a
visible ranking: passing, then failing, by id.

What the user changes lives in the query string (`pin`, `hide`, `ref`,
`density`, `wrap`, `cols`) rather than in the browser's storage: a link shows a
colleague the same view, the server lays the columns out so the page works
without JavaScript, and the back button undoes a change. Pinned columns come
first, in the default order (never in an order the URL sets), and stay in
view on horizontal scroll.

A group of more than MAX_COLUMNS trajectories (up to 50,000, the largest an
import takes) is paged: the matrix shows COLUMNS_PER_PAGE of them at a time in the
default order, from the `cols`-th on (the pinned ones on every page), and the page
reads and renders only those; a table of every trajectory, ROWS_PER_PAGE at a
time (webapp.review.summary), says where each stands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from webapp.html import patches
from webapp.rankings import FinalRanking, corrected_passing
from webapp.review.comparison import Cell, PatchFigures, Row

MAX_PINNED = 3  # each pinned column stays in view; more would leave no room for the others
REFERENCE_LABEL = "reference (human fix)"
MAX_COLUMNS = 64  # a group of up to this many trajectories shows every one as a column
COLUMNS_PER_PAGE = 16  # a larger one this many at a time
# "wide" columns (460 px) and "compact" ones (280 px) cut long lines, each hunk scrolling sideways;
# "narrow" ones (210 px) wrap every line, so no code is cut.
DENSITIES = ("wide", "compact", "narrow")
# Without a density in the address the window's width picks one: wide columns show two or three
# of a group's 13 candidates up to this width, narrow ones five or more. The server does not know
# the width, so the page says it as a stylesheet's media query (no script: it works without one).
AUTO_NARROW_MEDIA = "(max-width: 1600px)"


@dataclass(frozen=True)
class Choice:
    """The user's layout of the matrix, from the query string; `problems` says what in it
    could not apply, for the page to show."""

    pinned: tuple[int, ...] = ()  # trajectory pks
    hidden: frozenset[int] = frozenset()
    reference: bool = False
    density: str = ""  # one of DENSITIES, or "": picked by the window's width (AUTO_NARROW_MEDIA)
    wrap: bool = False
    start: int = 0  # a paged group's first column after the pinned ones, in the default order
    problems: tuple[str, ...] = ()

    def params(self, **changes) -> dict:
        """Query parameters of this choice with `changes` (field names) applied: pk lists
        sorted, flags as "1", defaults left out."""
        pinned = changes.get("pinned", self.pinned)
        hidden = changes.get("hidden", self.hidden)
        start = changes.get("start", self.start)
        return {
            "pin": [str(pk) for pk in sorted(pinned)],
            "hide": [str(pk) for pk in sorted(hidden)],
            "ref": "1" if changes.get("reference", self.reference) else "",
            "density": changes.get("density", self.density),
            "wrap": "1" if changes.get("wrap", self.wrap) else "",
            "cols": str(start) if start else "",
        }

    @property
    def auto(self) -> bool:
        return not self.density

    @property
    def compact(self) -> bool:
        return self.density == "compact"

    @property
    def narrow(self) -> bool:
        return self.density == "narrow"

    def carried(self) -> dict:
        """The parameters that make sense on another group's page: not its trajectories."""
        return {key: value for key, value in self.params().items() if key not in ("pin", "hide", "cols")}


def _flag(query, name: str, on: str, problems: list[str]) -> bool:
    value = query.get(name, "")
    if value not in ("", on):
        problems.append(f"{name}={value!r} is not understood: it takes {on!r} or nothing")
    return value == on


def _density(query, problems: list[str]) -> str:
    value = query.get("density", "")
    if value not in ("", *DENSITIES):
        problems.append(f"density={value!r} is not understood: it takes {' or '.join(map(repr, DENSITIES))} "
                        "or nothing")
        return ""
    return value


def _pks(query, name: str, known: dict[int, str], problems: list[str]) -> list[int]:
    out = []
    for value in query.getlist(name):
        pk = int(value) if value.isascii() and value.isdigit() and len(value) < 19 else None
        if pk not in known:
            problems.append(f"{name}={value!r} is not a trajectory of this group")
        elif pk not in out:
            out.append(pk)
    return out


def _start(query, problems: list[str]) -> int:
    """`cols`: an offset into the default order, at a page's first column."""
    value = query.get("cols", "")
    if not value:
        return 0
    if not (value.isascii() and value.isdigit() and len(value) < 10):
        problems.append(f"cols={value!r} is not understood: it takes a column number")
        return 0
    return int(value) - int(value) % COLUMNS_PER_PAGE


def parse(query, known: dict[int, str], *, has_reference: bool) -> Choice:
    """The choice in `query` (a QueryDict), for a group whose trajectory ids are `known`
    by pk. What cannot apply is left out and said in `problems`."""
    problems: list[str] = []
    reference = _flag(query, "ref", "1", problems)
    if reference and not has_reference:
        problems.append("ref=1: this group has no reference patch")
        reference = False
    pinned = _pks(query, "pin", known, problems)
    hidden = frozenset(_pks(query, "hide", known, problems))
    shown_pins = [pk for pk in pinned if pk not in hidden]
    if len(shown_pins) > MAX_PINNED:
        left = ", ".join(known[pk] for pk in shown_pins[MAX_PINNED:])
        problems.append(f"at most {MAX_PINNED} columns can be pinned: {left} not pinned")
        pinned = [pk for pk in pinned if pk not in shown_pins[MAX_PINNED:]]
    return Choice(pinned=tuple(pinned), hidden=hidden, reference=reference,
                  density=_density(query, problems), wrap=_flag(query, "wrap", "1", problems),
                  start=_start(query, problems), problems=tuple(problems))


def default_order(columns: list, final: FinalRanking | None) -> list:
    """`columns` in the final ranking's order (None: none the user may see), then the
    passing ones it does not rank, then the rest; ties and the rest by trajectory id."""
    by_tid = {c.tid: c for c in columns}
    ranked: list[str] = []
    seen: set[str] = set()
    verdicts = {}
    if final is not None:
        verdicts = final.verdicts
        for tier in final.tiers:
            ranked.extend(sorted({tid for tid in tier if tid in by_tid and tid not in seen}))
            seen.update(tier)
    passing = set(corrected_passing({c.tid: c.passed for c in columns}, verdicts))
    rest = sorted((tid for tid in by_tid if tid not in seen), key=lambda tid: (tid not in passing, tid))
    return [by_tid[tid] for tid in ranked + rest]


def paged(n_trajectories: int) -> bool:
    """Whether a group of `n_trajectories` shows a page of its columns at a time."""
    return n_trajectories > MAX_COLUMNS


@dataclass(frozen=True)
class Window:
    """The trajectories a paged group shows as columns: the pinned ones and a page of the
    rest (neither pinned nor hidden), in the default order; offsets of the pages around it."""

    members: list  # shown, in the default order (pinned ones first)
    start: int  # the page's first column among the rest
    stop: int
    n_rest: int
    n_trajectories: int
    previous: int | None
    next: int | None

    @property
    def pks(self) -> list[int]:
        return [m.pk for m in self.members]

    def start_of(self, index: int) -> int:
        """The page that shows the `index`-th of the rest."""
        return index - index % COLUMNS_PER_PAGE


def window(ordered: list, choice: Choice) -> Window:
    """The columns of a paged group for `choice`: `ordered` its trajectories in the default
    order (anything with `pk`, `tid` and `passed`). A page past the end shows the last one."""
    pinned = [m for m in ordered if m.pk in choice.pinned and m.pk not in choice.hidden]
    rest = [m for m in ordered if m.pk not in choice.pinned and m.pk not in choice.hidden]
    last = max(len(rest) - 1, 0)
    start = min(choice.start, last - last % COLUMNS_PER_PAGE)
    stop = min(start + COLUMNS_PER_PAGE, len(rest))
    return Window(members=pinned + rest[start:stop], start=start, stop=stop, n_rest=len(rest),
                  n_trajectories=len(ordered), previous=max(start - COLUMNS_PER_PAGE, 0) if start else None,
                  next=stop if stop < len(rest) else None)


def order_note(final: FinalRanking | None, *, hidden: bool) -> str:
    """How the columns are ordered, for the page to say; `hidden`: the user may not see
    some ranking of the group yet (blind review, k-way overlap)."""
    if final is None:
        why = "the ranking is hidden until you save yours" if hidden else "no ranking yet"
        return f"Columns: passing, then failing, by id ({why})."
    source = (f"the final ranking (human, version {final.version})" if final.source == "human"
              else "the final ranking (the grader's)")
    return f"Columns in the order of {source}, best first; then failing."


@dataclass(eq=False)
class ReferenceColumn(PatchFigures):
    """The group's reference patch as a column: task data, shown with the same diff view,
    never ranked."""

    view: patches.RenderedPatch
    is_reference = True
    tid = REFERENCE_LABEL
    classes = "col ref"


@dataclass
class Layout:
    columns: list  # the shown trajectory columns, in order
    matrix_columns: list  # the same with the reference column, if shown
    rows: list[Row]
    n_trajectories: int  # in the group, shown or not
    pinned: set[int] = field(default_factory=set)

    @property
    def counts(self) -> dict:
        """What the matrix's corner says: files and trajectories shown, with failing shown and hidden."""
        passing = [c for c in self.columns if c.passed]
        return {"files": len(self.rows), "trajectories": len(self.columns),
                "passing_files": sum(not row.fail_only for row in self.rows), "passing": len(passing)}


def arrange(ordered: list, rows, choice: Choice, reference: patches.RenderedPatch | None) -> Layout:
    """The shown columns of `ordered` (the default order) and `rows` (cells in any column
    order) re-cut to them: pinned columns first, then the reference (when chosen), then
    the rest. A file no shown column changes has no row. In the new
    rows `touched` counts the shown trajectories that change the file and `fail_only`
    means no shown passing one does (nor the reference); `unique` keeps its meaning over
    the whole group."""
    pinned = [c for c in ordered if c.trajectory.pk in choice.pinned and c.trajectory.pk not in choice.hidden]
    rest = [c for c in ordered if c.trajectory.pk not in choice.pinned and c.trajectory.pk not in choice.hidden]
    for slot, column in enumerate(pinned):
        column.pin_slot = slot
    shown = pinned + rest
    ref = ReferenceColumn(reference) if choice.reference else None
    matrix_columns = pinned + ([ref] if ref else []) + rest
    out = []
    for row in rows:
        by_pk = {cell.column.trajectory.pk: cell for cell in row.cells}
        cells = [Cell(c, by_pk[c.trajectory.pk].file, by_pk[c.trajectory.pk].unique) for c in shown]
        ref_file = ref.view.files.get(row.path) if ref else None
        if not any(cell.file for cell in cells) and ref_file is None:
            continue
        out.append(_row(row.path, cells, ref, ref_file, len(pinned), unique=row.unique))
    if ref:
        known = {row.path for row in rows}
        for path, ref_file in ref.view.files.items():
            if path not in known:
                out.append(_row(path, [Cell(c, None) for c in shown], ref, ref_file, len(pinned), unique=False))
    return Layout(columns=shown, matrix_columns=matrix_columns, rows=out, n_trajectories=len(ordered),
                  pinned={c.trajectory.pk for c in pinned})


def _row(path: str, cells: list[Cell], ref, ref_file, at: int, *, unique: bool) -> Row:
    touched = [cell for cell in cells if cell.file]
    fail_only = ref_file is None and not any(cell.column.passed for cell in touched)
    if ref:
        cells = cells[:at] + [Cell(ref, ref_file)] + cells[at:]
    return Row(path=path, cells=cells, touched=len(touched), unique=unique, fail_only=fail_only)
