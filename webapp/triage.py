"""Each group's triage summary: what the batch page lists, filters and sorts by.

The summary is stored on the group (denormalized), so a batch of 100,000 groups
filters and sorts by it through indexes. `triage_refresh` is its one writer,
called wherever an input changes: a grading finished, a human ranking, revert
or acceptance saved, a queue lease taken or released.

- grader_top: the top tier of the group's latest finished grading (ids);
  grader_top_flags: the flags the grader put on those trajectories.
- any_flags: every flag anyone put anywhere in the group: the grader on any
  trajectory, and each annotator in their latest ranking.
- grading_confidence: the grader's confidence in that grading.
- agreement: the lowest Kendall tau-b between an annotator's latest ranking and
  the grader's; null where no human ranked, there is no grading, or tau is
  undefined (fewer than two trajectories both rank apart).
- human_disagrees: some annotator's latest ranking names another top tier than
  the grader's, or orders the trajectories otherwise (tau < 1); null as above.
- review_state: see REVIEW_STATES.

Flag lists are stored as ",a,b," text, so `__contains=",edits_tests,"` filters
them exactly on SQLite and PostgreSQL alike.

Who may see which column is `triage_columns`: it asks the viewer (webapp.rankings),
where the blind-review and k-way overlap rule lives; the listing's selector blanks
the rest (`blank_hidden`) before a template sees a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from django.db import transaction

from grading.agreement import kendall_tau
from grading.rankings import FLAGS
from webapp.models import Annotation, Group, Lease
from webapp.rankings import CHUNK, UNRESTRICTED, Viewer, grader_rankings

UNREVIEWED, QUEUED, REVIEWED, DISPUTED = "unreviewed", "queued", "reviewed", "disputed"
# Exactly one holds for each group, the first that applies from the bottom up.
REVIEW_STATES = {
    UNREVIEWED: "nobody ranked it and nobody took it from the queue",
    QUEUED: "an annotator took it from the queue (their lease may have run out) and nobody ranked it yet",
    REVIEWED: "ranked, and everyone who ranked it names the same best tier",
    DISPUTED: "two people who ranked it name different best tiers (each person's latest ranking)",
}

# Which triage columns each part of the visibility rule hides: the grader's verdict,
# and other people's rankings (flags anywhere and agreement hold both).
GRADER_COLUMNS = frozenset({"grader_top", "grader_confidence"})
OTHERS_COLUMNS = frozenset({"review_state"})
BOTH_COLUMNS = frozenset({"any_flags", "agreement"})
COLUMNS = GRADER_COLUMNS | OTHERS_COLUMNS | BOTH_COLUMNS
# The Group fields each column is read from, and the value a viewer who may not see it gets.
COLUMN_FIELDS = {
    "grader_top": {"grader_top": None, "grader_top_flags": ""},
    "grader_confidence": {"grading_confidence": None},
    "any_flags": {"any_flags": ""},
    "agreement": {"agreement": None, "human_disagrees": None},
    "review_state": {"review_state": ""},
}


def triage_columns(viewer: Viewer, batch) -> frozenset[str]:
    """The triage columns `viewer` may see, filter and sort by on `batch`'s page."""
    hidden_from = viewer.on_listing(batch)
    hidden = set()
    if hidden_from.grader:
        hidden |= GRADER_COLUMNS | BOTH_COLUMNS
    if hidden_from.others:
        hidden |= OTHERS_COLUMNS | BOTH_COLUMNS
    return COLUMNS - hidden


def blank_hidden(groups, columns: frozenset[str]) -> None:
    """Overwrite, on each of `groups` (Group rows of one listing), the fields of the triage
    columns not in `columns`: what a template cannot read, it cannot show."""
    blanks = {name: value for column in COLUMNS - columns for name, value in COLUMN_FIELDS[column].items()}
    for group in groups:
        for name, value in blanks.items():
            setattr(group, name, value)


def flag_text(names: Iterable[str]) -> str:
    """",a,b," in FLAGS order; "" for none."""
    names = set(names)
    ordered = [f for f in FLAGS if f in names] + sorted(names - set(FLAGS))
    return f",{','.join(ordered)}," if ordered else ""


def flag_names(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


@dataclass(frozen=True)
class Summary:
    grader_top: list[str] | None  # None: no finished grading
    grader_top_flags: str
    any_flags: str
    grading_confidence: float | None
    agreement: float | None
    human_disagrees: bool | None
    review_state: str


Tiers = Sequence[Sequence[str]]


def summarise(*, grader_tiers: Tiers | None, grader_flags: dict, confidence: float | None,
              human: Sequence[tuple[Tiers, dict]], leased: bool) -> Summary:
    """One group's summary from its grader ranking (None: no finished grading), each
    annotator's latest ranking (tiers, flags) and whether a queue lease is out on it."""
    top = list(grader_tiers[0]) if grader_tiers else []
    everywhere = set().union(*grader_flags.values(), *(names for _, flags in human for names in flags.values()))
    agreement = disagrees = None
    if grader_tiers and human:
        taus = [kendall_tau(tiers, grader_tiers) for tiers, _ in human]
        defined = [t for t in taus if t is not None]
        agreement = min(defined) if defined else None
        disagrees = any(_top(tiers) != set(top) for tiers, _ in human) or any(t < 1 for t in defined)
    tops = {frozenset(_top(tiers)) for tiers, _ in human}
    state = DISPUTED if len(tops) > 1 else REVIEWED if human else QUEUED if leased else UNREVIEWED
    return Summary(
        grader_top=top if grader_tiers is not None else None,
        grader_top_flags=flag_text(name for tid in top for name in grader_flags.get(tid, ())),
        any_flags=flag_text(everywhere),
        grading_confidence=confidence,
        agreement=agreement,
        human_disagrees=disagrees,
        review_state=state,
    )


def _top(tiers: Tiers) -> set[str]:
    return set(tiers[0]) if tiers else set()


def triage_refresh(group_pks: Iterable[int]) -> None:
    """Recompute and store the triage summary of each group in `group_pks`.

    Reads name their columns, so the migration that adds the summary can fill it
    through this function whatever columns later migrations add."""
    pks = list(dict.fromkeys(group_pks))
    for start in range(0, len(pks), CHUNK):
        _refresh(pks[start:start + CHUNK])


def _refresh(pks: list[int]) -> None:
    graders = grader_rankings(pks, viewer=UNRESTRICTED)  # stored; the listing hides it (triage_columns)
    latest: dict[tuple[int, int], tuple] = {}
    rows = (Annotation.objects.filter(group_id__in=pks, kind=Annotation.Kind.RANKING).order_by("version")
            .values_list("group_id", "user_id", "tiers", "flags"))
    for group_pk, user_pk, tiers, flags in rows:
        latest[(group_pk, user_pk)] = (tiers or [], flags or {})
    human: dict[int, list] = {pk: [] for pk in pks}
    for (group_pk, _), ranking in latest.items():
        human[group_pk].append(ranking)
    leased = set(Lease.objects.filter(group_id__in=pks, completed_at=None).values_list("group_id", flat=True))
    with transaction.atomic():
        for pk in pks:
            _store(pk, graders.get(pk), human[pk], pk in leased)


def _store(pk: int, grader, human: list, leased: bool) -> None:
    summary = summarise(
        grader_tiers=grader.tiers if grader else None, grader_flags=dict(grader.flags) if grader else {},
        confidence=grader.confidence if grader else None, human=human, leased=leased)
    Group.objects.filter(pk=pk).update(**asdict(summary))
