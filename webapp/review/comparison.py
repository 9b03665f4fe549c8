"""The N-way comparison of one group: columns (trajectories) by rows (files).

Built from patch views, cached in-process and, for every web process, in
the render store (``renders``): a group opened for the first time parses
and highlights nothing whose render is stored. What depends on the whole
group (file alignment, files unique to one passing trajectory, equivalence
classes) comes from the views without parsing and is cached in-process,
keyed by the group's (trajectory id, patch digest, passed) tuple.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from grading.diffs import align_files, classes_by_key, unique_files
from webapp.html import patches, renders
from webapp.review import selectors


class PatchFigures:
    """What a column shows of its patch (`view`, a patches.RenderedPatch)."""

    @property
    def added(self) -> int:
        return self.view.parsed.added

    @property
    def removed(self) -> int:
        return self.view.parsed.removed

    @property
    def n_files(self) -> int:
        return len(self.view.parsed.files)

    @property
    def badges(self) -> str:
        return patches.marker_badges(self.view.parsed.markers)


@dataclass(eq=False)
class Column(PatchFigures):
    trajectory: object  # a Trajectory without its patch
    view: patches.RenderedPatch
    advantage: dict | None = None
    same_as: str | None = None
    same_kind: str | None = None  # "identical" or "whitespace"
    unique_paths: set = field(default_factory=set)
    messages: int | None = None  # transcript length, for data without num_turns
    grade: object = None  # the grader's verdict on this trajectory (review.ranking.GradeCell)
    pin_slot: int | None = None  # its place among the pinned columns (review.columns.arrange)
    is_reference = False  # review.columns.ReferenceColumn is the other kind of column

    @property
    def classes(self) -> str:
        pinned = "" if self.pin_slot is None else f" pinned pin-{self.pin_slot}"
        return f"col {'pass' if self.passed else 'fail'}{pinned}"

    @property
    def tid(self) -> str:
        return self.trajectory.trajectory_id

    @property
    def passed(self) -> bool:
        return self.trajectory.passed

    @property
    def metrics(self) -> dict:
        return self.trajectory.metrics if isinstance(self.trajectory.metrics, dict) else {}

    @property
    def turns(self):
        return self.metrics.get("num_turns")

    @property
    def needs_message_count(self) -> bool:
        return not isinstance(self.turns, int)

    @property
    def tokens(self):
        m = self.metrics
        return m.get("output_tokens", m.get("total_tokens"))

    @property
    def tests(self) -> dict:
        tests = self.trajectory.tests
        return tests if isinstance(tests, dict) else {}


@dataclass(eq=False)
class Cell:
    column: Column
    file: patches.RenderedFile | None
    unique: bool = False

    @property
    def html(self) -> str:
        return self.file.html_for(self.column.trajectory.pk) if self.file else ""


@dataclass(eq=False)
class Row:
    path: str
    cells: list[Cell]
    touched: int
    unique: bool  # touched by exactly one passing trajectory, which no other passing one needed
    fail_only: bool  # touched by failing trajectories only


@dataclass
class Analysis:
    paths: list[tuple[str, tuple[str, ...]]]
    unique: dict[str, set[str]]
    classes: list


_analyses: OrderedDict[tuple, Analysis] = OrderedDict()
_lock = threading.Lock()
_MAX_ANALYSES = 2048


def clear_caches() -> None:
    with _lock:
        _analyses.clear()
        _message_counts.clear()


def _analysis(key: tuple, views: dict[str, patches.RenderedPatch], passing: list[str]) -> Analysis:
    with _lock:
        found = _analyses.get(key)
        if found is not None:
            _analyses.move_to_end(key)
            return found
    parsed = {tid: v.parsed for tid, v in views.items()}
    rows = align_files(parsed)
    result = Analysis(
        paths=[(row.path, row.touched_by) for row in rows],
        unique=unique_files(parsed, passing) if len(passing) > 1 else {},
        classes=classes_by_key({tid: (v.key, v.change) for tid, v in views.items()}),
    )
    with _lock:
        _analyses[key] = result
        while len(_analyses) > _MAX_ANALYSES:
            _analyses.popitem(last=False)
    return result


def load_views(trajectories) -> dict[int, patches.RenderedPatch]:
    """Patch views by trajectory pk: from this process's cache, else from the render
    store (which renders what it lacks). Patch text is read only for those not cached."""
    views = {t.pk: patches.cached_view_for_hash(t.content_hash) for t in trajectories}
    missing = [t for t in trajectories if views[t.pk] is None]
    if missing:
        texts = selectors.patches(t.pk for t in missing)
        digests = {t.pk: patches.digest(texts[t.pk]) for t in missing}
        for batch_id in {t.batch_id for t in missing}:
            ours = [t for t in missing if t.batch_id == batch_id]
            found = renders.rendered({digests[t.pk]: texts[t.pk] for t in ours}, batch_id=batch_id)
            for t in ours:
                views[t.pk] = found[digests[t.pk]]
                patches.remember(t.content_hash, views[t.pk])
    return views


def reference_render(group) -> patches.RenderedPatch | None:
    """The group's reference patch with every hunk rendered, found as `load_views` finds
    a trajectory's; None without one."""
    text = group.reference_patch
    if not text:
        return None
    patch_digest = patches.digest(text)
    view = patches.cached_view(patches.render_key(patch_digest, lazy=False))
    if view is None:
        view = renders.rendered({patch_digest: text}, batch_id=group.batch_id, lazy=False)[patch_digest]
        patches.keep(view)
    return view


_message_counts: OrderedDict[tuple[int, str], int | None] = OrderedDict()


def _count_messages(columns: list[Column]) -> None:
    """Transcript lengths of the columns whose metrics have no turn count;
    transcripts never change, so the counts are kept."""
    wanted = {(c.trajectory.pk, c.trajectory.content_hash): c for c in columns if c.needs_message_count}
    with _lock:
        known = {key: _message_counts[key] for key in wanted if key in _message_counts}
    missing = [key for key in wanted if key not in known]
    if missing:
        counted = selectors.transcript_lengths(pk for pk, _ in missing)
        fresh = {key: counted.get(key[0]) for key in missing}
        with _lock:
            _message_counts.update(fresh)
            while len(_message_counts) > 100_000:
                _message_counts.popitem(last=False)
        known.update(fresh)
    for key, column in wanted.items():
        column.messages = known[key]


def build(trajectories, advantages: dict[str, dict]) -> tuple[list[Column], list[Row]]:
    views = load_views(trajectories)
    columns = [Column(trajectory=t, view=views[t.pk], advantage=advantages.get(t.trajectory_id))
               for t in trajectories]
    _count_messages(columns)
    by_tid = {c.tid: c.view for c in columns}
    passing = [c.tid for c in columns if c.passed]
    key = tuple((c.tid, c.view.key, c.passed) for c in columns)
    analysis = _analysis(key, by_tid, passing)
    index = {c.tid: c for c in columns}
    for cls in analysis.classes:
        representative = index[cls.representative]
        for member in cls.members[1:]:
            index[member].same_as = cls.representative
            # a whitespace class can hold byte-identical members too
            index[member].same_kind = "identical" if index[member].view.key == representative.view.key else "whitespace"
    for tid, paths in analysis.unique.items():
        index[tid].unique_paths = paths
    passing_set = set(passing)
    rows = []
    for path, touched in analysis.paths:
        cells = [Cell(column=c, file=c.view.files.get(path), unique=path in c.unique_paths) for c in columns]
        rows.append(Row(
            path=path, cells=cells, touched=len(touched),
            unique=any(cell.unique for cell in cells),
            fail_only=not passing_set.intersection(touched),
        ))
    return columns, rows
