"""The final ranking of a group, and what of it and of the grader a user may see.

The latest row of a group's final chain of annotations (a human ranking, a
revert or an accepted independent ranking) decides, source "human"; a group
without one, or whose latest final row hands it back to the grader, takes
its latest finished grading's ranking, source "grader". Every caller goes
through `final_rankings` (or `decide` for one group whose rows it already
holds).

Blind review and k-way overlap hide the grader's verdict and other people's
rankings from an annotator until they rank the group themselves. That rule
lives here, in `Viewer.hidden`, and holds by construction: every read that
carries the grader's verdict or people's rankings (`grader_rankings`,
`final_rankings`, `chain_heads`, `visible_ranking`, `visible_history`, and the
reads built on them: advantages, exports, the API) takes the viewer and applies
the rule inside; the unfiltered reads are private to this module. Stored copies
of what they carry are read the same way: the triage columns through
`webapp.triage.visible_triage`, the stored figures (grading panel, run page,
audit dashboard and report) through their selectors, each taking the viewer
and asking `Viewer.require_whole` or `require_all` inside.

A human ranking may override test verdicts (`FinalRanking.verdicts`): it then
ranks the trajectories that pass after the correction, and the group's
advantages take each overridden trajectory's `corrected_reward`. The grader
only ever ranks what the tests passed. Verdicts are part of the ranking, so
the blind-review rule hides and shows them with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Window
from django.db.models.expressions import RawSQL
from django.db.models.functions import RowNumber

from grading.rankings import ranks_from_tiers
from webapp.models import Annotation, AnnotationPolicy, Batch, Grading, GradingRun, Group
from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER, has_role

CHUNK = 5000  # ids per query, for queries that bind each: SQLite caps the number of bound parameters


@dataclass(frozen=True)
class FinalRanking:
    """Passing trajectory ids best first in tiers (ties share a tier), flags per id,
    the grader's scores if any (higher is better), and where the ranking came from.
    A human ranking names its annotation version and author, and the test verdicts
    it overrode: {trajectory id: {"passed": bool, "reason": text}}."""

    tiers: tuple[tuple[str, ...], ...]
    flags: Mapping[str, tuple[str, ...]]
    scores: Mapping[str, float] | None
    source: str
    grading_id: int | None
    grader_version: str
    grader: str = ""  # the grading run's grader (profile or module:Class); "" for a human ranking
    rationales: Mapping[str, str] = field(default_factory=dict)
    version: int | None = None
    author: str = ""
    confidence: float | None = None
    verdicts: Mapping[str, Mapping] = field(default_factory=dict)

    def ranks(self) -> dict[str, int]:
        """Standard competition ranks, 1 = best: (1, 2, 2, 4)."""
        return ranks_from_tiers(self.tiers)


def corrected_reward(passed: bool) -> float:
    """The reward of a trajectory whose test verdict a human overrode: the binary test
    reward, 1 for a pass and 0 for a fail, whatever the tests' reward was."""
    return 1.0 if passed else 0.0


def corrected_passing(passed: Mapping[str, bool], verdicts: Mapping[str, Mapping]) -> list[str]:
    """The ids that pass after `verdicts` correct the tests' `passed` (by id), in `passed`'s order."""
    return [tid for tid, p in passed.items() if (verdicts[tid]["passed"] if tid in verdicts else p)]


def _flags(flags) -> dict[str, tuple[str, ...]]:
    return {tid: tuple(names) for tid, names in (flags or {}).items() if names}


def pks_subquery(pks: list[int]) -> RawSQL:
    """A subquery that gives `pks`, for an `__in` lookup, bound as one parameter (an array on
    PostgreSQL, JSON on SQLite). Bound one by one, the ORM's preparation and psycopg's
    quoting of thousands of pks took longer than the query; written into the SQL, each
    chunk's query would be new text, and SQLite keeps the last 128 prepared."""
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", (pk_array(pks),))
    return RawSQL("SELECT value FROM json_each(%s)", (json.dumps(list(pks)),))


def pk_array(pks: Iterable[int]) -> str:
    """PostgreSQL's text of the bigint array `pks` ('{1,2,3}'), for a parameter cast to
    bigint[]: bound as a string, it costs a quarter of psycopg's quoting of a list of ints."""
    return "{" + ",".join(map(str, map(int, pks))) + "}"


def grader_rankings(group_pks: Iterable[int], *, viewer: Viewer, lean: bool = False) -> dict[int, FinalRanking]:
    """The latest finished grading's ranking of each group that has one and whose grader
    `viewer` may see, by group pk. `lean` leaves out the rationales and the confidence (empty,
    None): what advantages need, and most of a grading's bytes to read and decode."""
    pks = list(dict.fromkeys(group_pks))
    hidden = viewer.hidden_groups(pks)
    return {pk: ranking for pk, ranking in _grader_rankings(pks, lean=lean).items()
            if not hidden.get(pk, NOTHING_HIDDEN).grader}


def _grader_rankings(pks: list[int], *, lean: bool = False) -> dict[int, FinalRanking]:
    """Plain SQL: exports read the rankings of every group of a run, and the ORM's per-row
    conversions took as long as decoding the JSON. Both databases hand JSON columns over as
    text (Django's PostgreSQL connection loads jsonb as text), decoded here as the ORM would."""
    grading, run = (connection.ops.quote_name(model._meta.db_table) for model in (Grading, GradingRun))
    shown = "" if lean else ", g.rationales, g.confidence"
    out: dict[int, FinalRanking] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(pks), CHUNK):
            subquery = pks_subquery(pks[start:start + CHUNK])
            cursor.execute(
                f"SELECT g.group_id, g.id, g.tiers, g.flags, g.scores, g.grader_version, r.grader{shown} "
                f"FROM {grading} g JOIN {run} r ON r.id = g.run_id "
                f"WHERE g.group_id IN ({subquery.sql}) AND g.status = %s "
                f"ORDER BY g.group_id, g.finished_at DESC, g.id DESC", [*subquery.params, Grading.Status.DONE])
            for group_pk, pk, tiers, flags, scores, version, grader, *more in cursor.fetchall():
                if group_pk in out:
                    continue
                rationales, confidence = more or (None, None)
                out[group_pk] = FinalRanking(
                    tiers=tuple(tuple(tier) for tier in _json(tiers) or ()),
                    flags=_flags(_json(flags)),
                    scores=_json(scores),
                    source="grader",
                    grading_id=pk,
                    grader_version=version,
                    grader=grader,
                    rationales=_json(rationales) or {},
                    confidence=confidence,
                )
    return out


def _json(text: str | None):
    return None if text is None else json.loads(text)


def chain_heads(group_pks: Iterable[int], *, viewer: Viewer) -> list[Annotation]:
    """The latest row of each group's final chain, of the groups in `group_pks` whose other
    people's rankings `viewer` may see (k-way overlap hides them until the viewer ranks the
    group); one query, whatever the length of the history."""
    pks = list(dict.fromkeys(group_pks))
    hidden = viewer.hidden_groups(pks)
    return _chain_heads([pk for pk in pks if not hidden.get(pk, NOTHING_HIDDEN).others])


def _chain_heads(pks: list[int], *, user=None) -> list[Annotation]:
    """`chain_heads` without the rule and, with `user`, the head of that user's own
    (independent) chain too: for the reads here that apply the rule themselves."""
    chains = Q(independent=False) | Q(independent=True, user=user) if user is not None else Q(independent=False)
    out = []
    for start in range(0, len(pks), CHUNK):
        out.extend(
            Annotation.objects.filter(chains, group_id__in=pks_subquery(pks[start:start + CHUNK]))
            .annotate(head=Window(RowNumber(), partition_by=[F("group_id"), F("independent")],
                                  order_by=F("version").desc()))
            .filter(head=1).select_related("user")
        )
    return out


def human_ranking(annotation: Annotation) -> FinalRanking | None:
    """The ranking a final-chain row stands for; None when it hands the group back to the grader."""
    if annotation.tiers is None:
        return None
    return FinalRanking(
        tiers=tuple(tuple(tier) for tier in annotation.tiers),
        flags=_flags(annotation.flags),
        scores=None,
        source="human",
        grading_id=annotation.grading_id,
        grader_version="",
        rationales=annotation.rationales or {},
        version=annotation.version,
        author=annotation.user.get_username(),
        verdicts=annotation.verdicts or {},
    )


def decide(grader: FinalRanking | None, final_head: Annotation | None) -> FinalRanking | None:
    """One group's final ranking from its grader ranking and its final chain's latest row."""
    human = human_ranking(final_head) if final_head is not None else None
    return human or grader


def final_rankings(group_pks: Iterable[int], *, viewer: Viewer, lean: bool = False) -> dict[int, FinalRanking]:
    """The final ranking of each group in `group_pks` that has one and that `viewer` may see,
    by group pk. `lean`: the grader's rankings without rationales or confidence, for exports."""
    pks = list(dict.fromkeys(group_pks))
    hidden = viewer.hidden_groups(pks)
    graders = _grader_rankings(pks, lean=lean)
    heads = {head.group_id: head for head in _chain_heads(pks)}
    out = {}
    for pk in pks:
        final = shown(decide(graders.get(pk), heads.get(pk)), hidden.get(pk, NOTHING_HIDDEN))
        if final is not None:
            out[pk] = final
    return out


HUMAN_REVIEW_FILTERS = {
    "overridden": "overridden: final ranking is human",
    "reviewed": "ranked by a human",
    "unreviewed": "not ranked by a human",
}


def review_condition(state: str) -> Q:
    """Groups whose final ranking is a human one ("overridden"), or that some human ranked or not."""
    if state == "overridden":
        later = Annotation.objects.filter(group=OuterRef("group"), independent=False, version__gt=OuterRef("version"))
        return Q(Exists(Annotation.objects.filter(group=OuterRef("pk"), independent=False, tiers__isnull=False)
                        .exclude(Exists(later))))
    ranked = Q(Exists(Annotation.objects.filter(group=OuterRef("pk"), kind=Annotation.Kind.RANKING)))
    return ranked if state == "reviewed" else ~ranked


@dataclass(frozen=True)
class Hidden:
    """What the visibility rule hides from one viewer on one group (or on a listing)."""

    grader: bool  # blind review: the grader's verdict, until the viewer ranks the group
    others: bool  # k-way overlap: other people's rankings, until the viewer ranks the group

    def __bool__(self) -> bool:
        return self.grader or self.others


NOTHING_HIDDEN = Hidden(grader=False, others=False)


class RankingsHidden(Exception):
    """A read of a whole batch's grader-derived figures (advantages, flags, factors) by a viewer
    from whom the visibility rule hides some of them; the message says why."""


class Viewer:
    """Whom a read is for. Every read that carries the grader's verdict (ranks, flags,
    rationales, scores, confidence, factors, advantages) or people's rankings takes a viewer
    and applies the one visibility rule inside (`hidden`), so a page cannot forget to ask.

    `Viewer(user)` reads as that user may see. `UNRESTRICTED` reads everything: for writers
    that store derived data (triage summaries, audit figures), for files and commands whose
    readers are gated by role (exports: researchers; the command line: the operator). Pages
    and the API never use it (tests/webapp/test_architecture.py holds them to that)."""

    def __init__(self, user):
        self.user = user
        self._policies: dict[int, AnnotationPolicy] = {}

    def __repr__(self) -> str:
        return "Viewer(UNRESTRICTED)" if self.user is None else f"Viewer({self.user.get_username()!r})"

    def policy(self, batch) -> AnnotationPolicy:
        if batch.pk not in self._policies:
            self._policies[batch.pk] = AnnotationPolicy.of(batch)
        return self._policies[batch.pk]

    def hidden(self, batch, *, ranked: bool) -> Hidden:
        """What is hidden from this viewer on a group of `batch` they have (`ranked`) or have not
        ranked: an annotator who is not a researcher sees neither the grader (blind review) nor
        other people's rankings (k-way overlap) until they rank the group."""
        if ranked or not self._may_be_blind:
            return NOTHING_HIDDEN
        policy = self.policy(batch)
        return Hidden(grader=policy.blind, others=policy.independent)

    @property
    def _may_be_blind(self) -> bool:
        """Whether the rule can hide anything from this viewer on some batch: from an annotator
        who is neither a researcher nor an auditor (both always see the grader: docs/annotation.md).
        The roles are read once per user, so a reader the rule never hides from reads no policy."""
        return (self.user is not None and has_role(self.user, ANNOTATOR)
                and not has_role(self.user, RESEARCHER) and not has_role(self.user, AUDITOR))

    def on_listing(self, batch) -> Hidden:
        """What is hidden on a listing of `batch`'s groups or on figures over all of them. A
        listing filters and sorts across groups, so the rule holds for all of them alike, as for
        groups the viewer has not ranked: ordering or filtering by a value shown only on the
        groups they ranked would still tell the others' values apart."""
        return self.hidden(batch, ranked=False)

    def require_whole(self, batch) -> None:
        """RankingsHidden unless the viewer may see every group's rankings in `batch`."""
        if self.on_listing(batch):
            raise RankingsHidden(f"the rankings of batch {batch.name} are hidden from you until you rank its "
                                 "groups (blind review or k-way overlap)")

    def require_all(self, batches: QuerySet[Batch]) -> None:
        """`require_whole` for every batch of `batches`, reading only those whose policy can
        hide anything: a run of a thousand steps is not a thousand policies."""
        if not self._may_be_blind:
            return
        for batch in (batches.filter(AnnotationPolicy.may_hide("annotation_policy__"))
                      .select_related("annotation_policy").defer("sources", "advantage_config")):
            self.require_whole(batch)

    def hidden_groups(self, group_pks: list[int]) -> dict[int, Hidden]:
        """What is hidden on each of `group_pks` that hides anything, by group pk."""
        if not self._may_be_blind or not group_pks:
            return {}
        out = {}
        by_batch: dict[int, list[int]] = {}
        for pk, batch_pk in Group.objects.filter(pk__in=pks_subquery(group_pks)).values_list("pk", "batch_id"):
            by_batch.setdefault(batch_pk, []).append(pk)
        for batch in Batch.objects.filter(pk__in=by_batch).select_related("annotation_policy"):
            if not self.on_listing(batch):
                continue
            pks = by_batch[batch.pk]
            ranked = set(Annotation.objects.filter(group_id__in=pks_subquery(pks), user=self.user,
                                                   kind=Annotation.Kind.RANKING).values_list("group_id", flat=True))
            out.update((pk, self.hidden(batch, ranked=pk in ranked)) for pk in pks)
        return {pk: hidden for pk, hidden in out.items() if hidden}


UNRESTRICTED = Viewer(None)


def shown(final: FinalRanking | None, hidden: Hidden) -> FinalRanking | None:
    """`final` unless the rule hides its source from the viewer: a hidden human ranking is not
    replaced by the grader's, which it overrode."""
    if final is None or {"grader": hidden.grader, "human": hidden.others}[final.source]:
        return None
    return final


@dataclass(frozen=True)
class VisibleRanking:
    """What of a group's rankings one user may see now. `grader` and `final` are None
    when there is none or it is hidden; `final_head` is None when hidden."""

    policy: AnnotationPolicy
    hidden: Hidden
    grader: FinalRanking | None
    final: FinalRanking | None
    final_head: Annotation | None  # the final chain's latest row
    own_head: Annotation | None  # the user's own chain's latest row (k-way overlap)

    @property
    def hide_grader(self) -> bool:
        return self.hidden.grader

    @property
    def hide_others(self) -> bool:
        return self.hidden.others


def visible_ranking(viewer: Viewer, group: Group, *, ranked: bool | None = None) -> VisibleRanking:
    """The rankings of `group` as `viewer` may see them. `ranked`: whether the viewer has saved a
    ranking of `group` (the group page's query already knows); looked up when None."""
    hidden = viewer.hidden(group.batch, ranked=_ranked(viewer, group) if ranked is None else ranked)
    grader = _grader_rankings([group.pk]).get(group.pk)
    heads = _chain_heads([group.pk], user=viewer.user)
    final_head = next((h for h in heads if not h.independent), None)
    own_head = next((h for h in heads if h.independent), None)
    return VisibleRanking(
        policy=viewer.policy(group.batch), hidden=hidden,
        grader=None if hidden.grader else grader, final=shown(decide(grader, final_head), hidden),
        final_head=None if hidden.others else final_head, own_head=own_head,
    )


def visible_history(viewer: Viewer, group: Group, *, ranked: bool | None = None) -> list[Annotation]:
    """The versions of `group`'s ranking history the viewer may see, newest first: under k-way
    overlap only their own until they rank the group."""
    versions = Annotation.objects.filter(group=group).select_related("user").order_by("-version")
    if viewer.hidden(group.batch, ranked=_ranked(viewer, group) if ranked is None else ranked).others:
        versions = versions.filter(user=viewer.user)
    return list(versions)


def _ranked(viewer: Viewer, group: Group) -> bool:
    return viewer.user is not None and Annotation.objects.filter(
        group=group, user=viewer.user, kind=Annotation.Kind.RANKING).exists()
