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
- top_lines, lines_over_shortest, top_is_consensus: the grader beside two baselines
  (`patch_sizes`), read from the patches of the trajectories its latest grading ranks:
  the changed lines of its top pick (the fewest in the top tier) and how many more
  that is than the shortest ranked patch (0: the top tier holds a shortest patch);
  whether the top tier holds the group's consensus, the change most of them made
  (`grading.diffs.equivalence_classes`; null where no change was made twice).
  Lines are counted as the grader bench's "shortest patch first" baseline counts them
  (`grading.evaluation.changed_lines`). Stored with the grading they were computed
  from (`sizes_grading`), so a refresh that finds the same grading reads no patch.

Flag lists are stored as ",a,b," text, so `__contains=",edits_tests,"` filters
them exactly on SQLite and PostgreSQL alike.

The summary is a stored copy of the grader's verdict and of people's rankings, so it is
read as the viewer may see it, through `visible_triage`: it asks the viewer (webapp.rankings),
where the blind-review and k-way overlap rule lives, which columns they may see, filter and
sort by, and blanks the others on a listing's rows before a selector or template sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from django.db import transaction

from grading.agreement import kendall_tau
from grading.diffs import equivalence_classes
from grading.evaluation import changed_lines
from grading.rankings import FLAGS
from webapp.models import Annotation, Group, Lease, Trajectory
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
GRADER_COLUMNS = frozenset({"grader_top", "grader_confidence", "patch_size"})
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
    "patch_size": {"top_lines": None, "lines_over_shortest": None, "top_is_consensus": None},
}


@dataclass(frozen=True)
class VisibleTriage:
    """A batch's triage summary as one viewer may read it (`visible_triage`)."""

    columns: frozenset[str]  # the triage columns the viewer may see, filter and sort by

    def rows(self, groups: list[Group]) -> list[Group]:
        """`groups` (Group rows of the batch's listing) with the fields of every other column
        overwritten: what a template cannot read, it cannot show."""
        blanks = {name: value for column in COLUMNS - self.columns for name, value in COLUMN_FIELDS[column].items()}
        for group in groups:
            for name, value in blanks.items():
                setattr(group, name, value)
        return groups


def visible_triage(batch, *, viewer: Viewer) -> VisibleTriage:
    """The triage columns of `batch`'s listing as `viewer` may read them: the rule hides them for
    the whole listing (`Viewer.on_listing`)."""
    hidden_from = viewer.on_listing(batch)
    hidden = set()
    if hidden_from.grader:
        hidden |= GRADER_COLUMNS | BOTH_COLUMNS
    if hidden_from.others:
        hidden |= OTHERS_COLUMNS | BOTH_COLUMNS
    return VisibleTriage(columns=COLUMNS - hidden)


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


@dataclass(frozen=True)
class Sizes:
    top_lines: int | None
    lines_over_shortest: int | None
    top_is_consensus: bool | None


NO_SIZES = Sizes(None, None, None)


def patch_sizes(grader_tiers: Tiers | None, patches: Mapping[str, str]) -> Sizes:
    """The grader's top pick against the shortest ranked patch and the group's consensus;
    `patches`: the text of each trajectory the grader ranks, by id."""
    ranked = [tid for tier in grader_tiers or () for tid in tier if tid in patches]
    top = [tid for tid in (grader_tiers[0] if grader_tiers else ()) if tid in patches]
    if not top:
        return NO_SIZES
    lines = {tid: len(changed_lines(patches[tid])) for tid in ranked}
    top_lines = min(lines[tid] for tid in top)
    classes = equivalence_classes({tid: patches[tid] for tid in ranked})
    largest = max((len(c.members) for c in classes), default=0)
    consensus = {tid for c in classes if len(c.members) == largest for tid in c.members}
    return Sizes(top_lines=top_lines, lines_over_shortest=top_lines - min(lines.values()),
                 top_is_consensus=bool(consensus & set(top)) if consensus else None)


def triage_refresh(group_pks: Iterable[int], *, sizes: bool = True) -> None:
    """Recompute and store the triage summary of each group in `group_pks`.

    Reads name their columns, so the migration that adds the summary can fill it
    through this function whatever columns later migrations add; `sizes=False` leaves
    out the patch-size fields (`patch_sizes`), for the migrations before they exist."""
    pks = list(dict.fromkeys(group_pks))
    for start in range(0, len(pks), CHUNK):
        _refresh(pks[start:start + CHUNK], sizes)


def _sizes(pks: list[int], graders: dict) -> dict[int, tuple[int | None, Sizes]]:
    """(grading pk, Sizes) of each group whose stored sizes are not of its latest grading."""
    stored = dict(Group.objects.filter(pk__in=pks).values_list("pk", "sizes_grading"))
    stale = {pk for pk in pks if stored.get(pk) != (graders[pk].grading_id if pk in graders else None)}
    wanted = {pk: {tid for tier in graders[pk].tiers for tid in tier} for pk in stale if pk in graders}
    patches: dict[int, dict[str, str]] = {pk: {} for pk in wanted}
    if wanted:
        rows = (Trajectory.objects.filter(group_id__in=list(wanted), passed=True)
                .values_list("group_id", "trajectory_id", "patch"))
        for group_pk, tid, patch in rows.iterator(chunk_size=2000):
            if tid in wanted[group_pk]:
                patches[group_pk][tid] = patch
    return {pk: (graders[pk].grading_id, patch_sizes(graders[pk].tiers, patches[pk])) if pk in wanted
            else (None, NO_SIZES) for pk in stale}


def _refresh(pks: list[int], sizes: bool) -> None:
    graders = grader_rankings(pks, viewer=UNRESTRICTED)  # stored; read through visible_triage
    latest: dict[tuple[int, int], tuple] = {}
    rows = (Annotation.objects.filter(group_id__in=pks, kind=Annotation.Kind.RANKING).order_by("version")
            .values_list("group_id", "user_id", "tiers", "flags"))
    for group_pk, user_pk, tiers, flags in rows:
        latest[(group_pk, user_pk)] = (tiers or [], flags or {})
    human: dict[int, list] = {pk: [] for pk in pks}
    for (group_pk, _), ranking in latest.items():
        human[group_pk].append(ranking)
    leased = set(Lease.objects.filter(group_id__in=pks, completed_at=None).values_list("group_id", flat=True))
    fresh = _sizes(pks, graders) if sizes else {}
    with transaction.atomic():
        for pk in pks:
            _store(pk, graders.get(pk), human[pk], pk in leased, fresh.get(pk))


def _store(pk: int, grader, human: list, leased: bool, sized: tuple[int | None, Sizes] | None) -> None:
    summary = summarise(
        grader_tiers=grader.tiers if grader else None, grader_flags=dict(grader.flags) if grader else {},
        confidence=grader.confidence if grader else None, human=human, leased=leased)
    fields = asdict(summary)
    if sized is not None:  # None: unchanged since the grading they were computed from
        fields.update(asdict(sized[1]), sizes_grading=sized[0])
    Group.objects.filter(pk=pk).update(**fields)
