"""How far human review of a batch has come, and how people agree with the grader and each other."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from grading.agreement import Estimate, kendall_tau, summarise
from webapp.models import Annotation, AnnotationPolicy, Batch, Group
from webapp.selectors import review_condition
from webapp.services.rankings import grader_rankings


@dataclass(frozen=True)
class AnnotatorProgress:
    username: str
    groups: int
    vs_grader: Estimate  # Kendall tau of their latest ranking of each group vs the grader's


@dataclass(frozen=True)
class BatchReview:
    mixed: int
    reviewed: int  # mixed groups that at least one person ranked
    complete: int  # mixed groups that k people ranked
    overridden: int  # groups whose final ranking is human
    annotators: list[AnnotatorProgress]
    between_annotators: Estimate  # tau over pairs of people who ranked the same group


def batch_review(batch: Batch) -> BatchReview:
    policy = AnnotationPolicy.of(batch)
    rows = (Annotation.objects.filter(group__batch=batch, kind=Annotation.Kind.RANKING)
            .order_by("version").values_list("group_id", "group__label", "user__username", "tiers"))
    latest: dict[tuple[int, str], list] = {}
    mixed_groups: set[int] = set()
    for group_pk, label, username, tiers in rows:
        latest[(group_pk, username)] = tiers
        if label == Group.Label.MIXED:
            mixed_groups.add(group_pk)
    graders = grader_rankings({group_pk for group_pk, _ in latest})
    by_user: dict[str, list] = {}
    by_group: dict[int, list] = {}
    for (group_pk, username), tiers in latest.items():
        by_user.setdefault(username, []).append(group_pk)
        by_group.setdefault(group_pk, []).append(tiers)
    annotators = []
    for username, group_pks in sorted(by_user.items(), key=lambda item: (-len(item[1]), item[0])):
        pairs = [(latest[(g, username)], graders[g].tiers) for g in group_pks if g in graders]
        annotators.append(AnnotatorProgress(username, len(group_pks), summarise(pairs).kendall_tau))
    between = [kendall_tau(a, b) for rankings in by_group.values() for a, b in combinations(rankings, 2)]
    between = [t for t in between if t is not None]
    return BatchReview(
        mixed=Group.objects.filter(batch=batch, label=Group.Label.MIXED).count(),
        reviewed=len(mixed_groups),
        complete=sum(1 for g in mixed_groups if len(by_group[g]) >= policy.overlap),
        overridden=Group.objects.filter(batch=batch).filter(review_condition("overridden")).count(),
        annotators=annotators,
        between_annotators=Estimate(sum(between) / len(between), None, len(between)) if between else Estimate(
            None, None, 0),
    )
