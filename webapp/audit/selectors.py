"""Reads of the audit pages: sets and their progress, an item with the grading it audits,
what of other auditors' verdicts a user may see, the corrected ranking, and the gold set.

Auditors see the grader (that is what they audit) but not each other: `visible_verdicts`
is the one place that decides which verdicts on an item a user may see.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef
from django.shortcuts import get_object_or_404

from grading.rankings import tier_lines
from webapp.models import Annotation, AuditItem, AuditSet, AuditVerdict, Batch, GoldGroup, Grading, Group
from webapp.rankings import FinalRanking, Viewer, chain_heads
from webapp.roles import AUDIT_ROLES, has_role


def may_audit(user) -> bool:
    return has_role(user, *AUDIT_ROLES)


def audit_sets():
    """Every set, newest first, with its number of items and of verdicts."""
    return (AuditSet.objects.select_related("batch", "run", "created_by")
            .annotate(n_items=Count("items", distinct=True), n_verdicts=Count("items__verdicts", distinct=True)))


def set_progress(audit_set: AuditSet) -> list[tuple[str, int]]:
    """(auditor, verdicts given) for everyone who gave one, most first: counts only, never verdicts."""
    rows = (AuditVerdict.objects.filter(item__audit_set=audit_set).values("auditor__username")
            .annotate(n=Count("pk")).order_by("-n", "auditor__username"))
    return [(row["auditor__username"], row["n"]) for row in rows]


def set_items(audit_set: AuditSet, user) -> list[AuditItem]:
    """The set's items in order, each with the group, `mine` (the user's verdict or None) and
    `n_verdicts` (how many auditors gave one)."""
    items = list(audit_set.items.select_related("group", "grading").annotate(n_verdicts=Count("verdicts")))
    mine = {v.item_id: v for v in AuditVerdict.objects.filter(item__audit_set=audit_set, auditor=user)}
    for item in items:
        item.mine = mine.get(item.pk)
    return items


def item_for_page(pk: int) -> AuditItem:
    return get_object_or_404(
        AuditItem.objects.select_related("audit_set", "grading__run").annotate(
            n_items=Count("audit_set__items", distinct=True)), pk=pk)


def next_item(audit_set: AuditSet, user, *, after: int = 0) -> AuditItem | None:
    """The first item after position `after` that `user` has not judged, else the first such
    item from the start; None when they judged them all."""
    done = AuditVerdict.objects.filter(item=OuterRef("pk"), auditor=user)
    todo = audit_set.items.exclude(Exists(done)).order_by("position")
    return todo.filter(position__gt=after).first() or todo.first()


def previous_item(item: AuditItem) -> AuditItem | None:
    return item.audit_set.items.filter(position__lt=item.position).order_by("-position").first()


def own_verdict(item: AuditItem, user) -> AuditVerdict | None:
    return AuditVerdict.objects.filter(item=item, auditor=user).first()


def visible_verdicts(item: AuditItem, user) -> list[AuditVerdict]:
    """Every verdict on `item` once `user` has given theirs; before that, none: an auditor
    judges the grader without knowing what other auditors said."""
    verdicts = list(item.verdicts.select_related("auditor").order_by("created_at", "pk"))
    return verdicts if any(v.auditor_id == user.pk for v in verdicts) else []


def audited_ranking(grading: Grading) -> FinalRanking:
    """The ranking of the grading an item audits (rankings.grader_rankings gives the latest
    one of a group, which may be a later grading than the one audited)."""
    return FinalRanking(
        tiers=tuple(tuple(tier) for tier in grading.tiers or ()),
        flags={tid: tuple(names) for tid, names in (grading.flags or {}).items() if names},
        scores=grading.scores, source="grader", grading_id=grading.pk, grader_version=grading.grader_version,
        grader=grading.run.grader, rationales=grading.rationales or {}, confidence=grading.confidence,
    )


@dataclass(frozen=True)
class RankedRow:
    rank: int
    tid: str
    tied: bool
    score: float | None
    flags: tuple[str, ...]
    rationale: str


def ranking_rows(ranking: FinalRanking) -> list[RankedRow]:
    """One row per ranked trajectory, best first, with its score, flags and rationale."""
    scores = ranking.scores or {}
    return [RankedRow(rank=rank, tid=tid, tied=len(ids) > 1, score=scores.get(tid),
                      flags=ranking.flags.get(tid, ()), rationale=ranking.rationales.get(tid, ""))
            for rank, ids in tier_lines(ranking.tiers) for tid in ids]


def corrected_ranking(item: AuditItem, user) -> Annotation | None:
    """The ranking of the item's group that `user` saved last since the set was made: the
    correction their verdict records."""
    return (Annotation.objects.filter(group_id=item.group_id, user=user, kind=Annotation.Kind.RANKING,
                                      created_at__gte=item.audit_set.created_at).order_by("-version").first())


# --- the gold set -----------------------------------------------------------------------


def verified_ranking(group: Group, *, viewer: Viewer) -> Annotation | None:
    """The human ranking that is the group's final ranking, if there is one and `viewer` may
    see it: what marking the group as gold verifies."""
    head = next(iter(chain_heads([group.pk], viewer=viewer)), None)
    return head if head is not None and head.tiers is not None else None


def gold_groups(batch: Batch):
    """The batch's gold groups, with who marked them and whether the human ranking moved on since."""
    later = Annotation.objects.filter(group=OuterRef("group"), independent=False,
                                      version__gt=OuterRef("annotation_version"))
    return (GoldGroup.objects.filter(group__batch=batch).select_related("group", "marked_by")
            .annotate(changed_since=Exists(later)).order_by("group__group_id"))


def gold_state(group: Group) -> GoldGroup | None:
    return GoldGroup.objects.filter(group=group).select_related("marked_by").first()

