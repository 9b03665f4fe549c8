"""What the group page's ranking editor, the grader slot and the history page show.

The editor starts from the ranking the user edits (their own chain under
k-way overlap, else the final chain), else from the final ranking when the
user may see it, else empty: every passing trajectory in the unranked pool.
A submitted ranking that was refused comes back as it was sent.

A trajectory whose test verdict the ranking overrides (`Start.verdicts`)
sits where its corrected verdict puts it: marked not passing, with the
failing ones (out of the ranking); marked passing, in the ranking or the
unranked pool like any passing one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from grading.agreement import kendall_tau, ranking_diff
from grading.rankings import FLAGS, ranks_from_tiers, summary
from webapp.rankings import FinalRanking, corrected_passing


@dataclass
class GradeCell:
    """The grader's verdict on one trajectory, for the group page's grader row."""

    rank: int | None
    rationale: str
    flags: tuple[str, ...]


def grade_cells(columns, grader: FinalRanking | None, *, hidden: bool) -> None:
    """Give each passing column the grader's rank, rationale and flags (nothing when hidden)."""
    if grader is None or hidden:
        return
    ranks = grader.ranks()
    for column in columns:
        if column.passed:
            column.grade = GradeCell(ranks.get(column.tid), grader.rationales.get(column.tid, ""),
                                     tuple(grader.flags.get(column.tid, ())))


@dataclass
class Item:
    column: object  # comparison.Column of a trajectory
    flags: list[str] = field(default_factory=list)
    rationale: str = ""
    rank: int | None = None
    tied: bool = False  # shares the rank of the item before it
    grader_rank: int | None = None
    overridden: bool = False  # its test verdict is turned around
    override_reason: str = ""

    @property
    def passes(self) -> bool:
        """Its verdict after the override, if any."""
        return self.column.passed != self.overridden

    @property
    def tid(self) -> str:
        return self.column.tid

    @property
    def pk(self) -> int:
        return self.column.trajectory.pk


@dataclass
class Start:
    """A ranking to open the editor with."""

    tiers: Sequence[Sequence[str]] = ()
    flags: Mapping[str, Sequence[str]] = field(default_factory=dict)
    rationales: Mapping[str, str] = field(default_factory=dict)
    group_rationale: str = ""
    verdicts: Mapping[str, Mapping] = field(default_factory=dict)
    label: str = "empty: rank the passing trajectories"


@dataclass
class Editor:
    ranked: list[Item]
    pool: list[Item]
    failing: list[Item]  # failing by the tests, or marked not passing
    based_on_version: int
    grading_id: int | None
    group_rationale: str
    start_label: str
    start_json: str
    grader_json: str
    error: str = ""
    flags_vocabulary: tuple[str, ...] = FLAGS

    @property
    def complete(self) -> bool:
        return not self.pool

    @property
    def flag_keys(self) -> int:
        """How many flags the keys 1-9 toggle (ranking.js): the first ones of the vocabulary."""
        return min(9, len(self.flags_vocabulary))


def build_editor(columns, start: Start, *, based_on_version: int, grading_id: int | None,
                 grader: FinalRanking | None, error: str = "") -> Editor:
    """The editor's items from `start`; `grader` (None when hidden) adds its rank beside each."""
    by_tid = {c.tid: c for c in columns}
    passing = set(corrected_passing({c.tid: c.passed for c in columns}, start.verdicts))
    ranks = ranks_from_tiers([[t for t in tier if t in passing] for tier in start.tiers])
    grader_ranks = grader.ranks() if grader is not None else {}

    def item(tid: str) -> Item:
        verdict = start.verdicts.get(tid)
        return Item(by_tid[tid], flags=[f for f in FLAGS if f in set(start.flags.get(tid, ()))],
                    rationale=start.rationales.get(tid, ""), rank=ranks.get(tid), grader_rank=grader_ranks.get(tid),
                    overridden=verdict is not None, override_reason=verdict["reason"] if verdict else "")

    ranked = []
    for tier in start.tiers:
        for i, tid in enumerate(t for t in tier if t in passing and t not in {x.tid for x in ranked}):
            ranked.append(item(tid))
            ranked[-1].tied = i > 0
    seen = {x.tid for x in ranked}
    pool = [item(c.tid) for c in columns if c.tid in passing and c.tid not in seen]
    return Editor(
        ranked=ranked, pool=pool, failing=[item(c.tid) for c in columns if c.tid not in passing],
        based_on_version=based_on_version, grading_id=grading_id, group_rationale=start.group_rationale,
        start_label=start.label, start_json=json.dumps([list(t) for t in start.tiers]),
        grader_json=json.dumps([list(t) for t in grader.tiers]) if grader is not None else "",
        error=error,
    )


def tau(a, b) -> float | None:
    return kendall_tau(a, b) if a and b else None


@dataclass(frozen=True)
class MoveRow:
    item: str
    before: int | None
    after: int | None
    change: int | None

    @property
    def direction(self) -> str:
        if self.before is None:
            return "new"
        if self.after is None:
            return "dropped"
        return "up" if self.change > 0 else "down" if self.change < 0 else "same"


def diff_rows(before, after) -> list[MoveRow]:
    """Each trajectory's rank (1, 2, 2, 4) before and after, in the order of `after` then the
    dropped ones (ranking_diff's order); the change is positive for a move up."""
    ranks_before, ranks_after = ranks_from_tiers(before or ()), ranks_from_tiers(after or ())
    rows = []
    for move in ranking_diff(before or (), after or ()):
        b, a = ranks_before.get(move.item), ranks_after.get(move.item)
        rows.append(MoveRow(move.item, b, a, None if b is None or a is None else b - a))
    return rows


def describe(tiers) -> str:
    return summary(tiers) if tiers else "the grader's ranking"


@dataclass(frozen=True)
class Preview:
    """Advantage rows in the order of a ranking (then unranked, then failing), with Δ."""

    rows: list[dict]
    passing_sum: float
    problem: str = ""


def preview(rows: list[dict], tiers, *, problem: str = "") -> Preview:
    order: dict[str, int] = {}
    for tier in tiers or ():
        for tid in tier:
            order.setdefault(tid, len(order))
    ordered = sorted(rows, key=lambda r: (not r["passed"], order.get(r["trajectory_id"], len(order)),
                                          r["trajectory_id"]))
    for row in ordered:
        delta = row["advantage"] - row["grpo_advantage"]
        row["delta"] = 0.0 if abs(delta) < 5e-4 else delta  # no "−0.000"
    return Preview(ordered, sum(r["advantage"] for r in rows if r["passed"]), problem)
