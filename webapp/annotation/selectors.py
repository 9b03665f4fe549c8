"""Reads of human review: the annotation queue, and how far review of a batch has come
(how people agree with the grader and with each other).

The queue: a batch's policy says which mixed groups enter it (any of: every group
not yet reviewed, ungraded, grader failed, low grader confidence, a seeded random
sample). A group leaves it once k annotators (the policy's overlap) have ranked it,
and a live lease of someone else's keeps it from the others (`services.lease_next_group`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Mod
from django.utils import timezone

from grading.agreement import Estimate, kendall_tau, summarise
from webapp.models import Annotation, AnnotationPolicy, Batch, Grading, Group, Lease
from webapp.rankings import Viewer, grader_rankings, review_condition

# The sample draws id -> (id * multiplier + offset(seed)) mod a prime: it spreads ids evenly
# over [0, modulus), the seed shifts the whole draw, and any database computes it.
SAMPLE_MODULUS = 1_000_003
SAMPLE_MULTIPLIER = 2_654_435_761


def _sample_offset(seed: int) -> int:
    return (seed * 2_246_822_519 + 3_266_489_917) % SAMPLE_MODULUS


def _count(queryset, column: str) -> Coalesce:
    counted = queryset.order_by().values("group").annotate(n=Count(column, distinct=True)).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def _criteria(policy: AnnotationPolicy) -> Q:
    done = Grading.objects.filter(group=OuterRef("pk"), status=Grading.Status.DONE)
    conditions = {
        AnnotationPolicy.Criterion.UNREVIEWED: Q(),
        AnnotationPolicy.Criterion.UNGRADED: ~Exists(done),
        AnnotationPolicy.Criterion.FAILED: ~Exists(done) & Exists(
            Grading.objects.filter(group=OuterRef("pk"), status=Grading.Status.FAILED)),
        AnnotationPolicy.Criterion.LOW_CONFIDENCE: Q(grader_confidence__lt=policy.confidence_below),
        AnnotationPolicy.Criterion.SAMPLE: Q(sample_draw__lt=policy.sample_rate * SAMPLE_MODULUS),
    }
    chosen = [conditions[c] for c in policy.criteria if c in conditions]
    if not chosen or Q() in chosen:
        return Q()
    out = chosen[0]
    for condition in chosen[1:]:
        out |= condition
    return out


def queue_groups(*, user, batch: Batch, policy: AnnotationPolicy | None = None, now=None):
    """The groups of `batch` the queue may hand to `user`, in order: mixed, meeting the
    policy, not ranked by `user`, ranked by fewer than k people, with a free lease slot."""
    policy = policy or AnnotationPolicy.of(batch)
    now = now or timezone.now()
    latest_done = (Grading.objects.filter(group=OuterRef("pk"), status=Grading.Status.DONE)
                   .order_by("-finished_at", "-pk").values("confidence")[:1])
    held = Lease.objects.filter(group=OuterRef("pk")).exclude(user=user).filter(
        Q(completed_at__isnull=False) | Q(expires_at__gt=now))
    rankers = Annotation.objects.filter(group=OuterRef("pk"), kind=Annotation.Kind.RANKING)
    return (
        Group.objects.filter(batch=batch, label=Group.Label.MIXED)
        .annotate(grader_confidence=Subquery(latest_done),
                  sample_draw=Mod(F("id") * SAMPLE_MULTIPLIER + _sample_offset(policy.sample_seed), SAMPLE_MODULUS),
                  n_rankers=_count(rankers, "user"), n_held=_count(held, "slot"))
        .filter(_criteria(policy))
        .exclude(Exists(Annotation.objects.filter(group=OuterRef("pk"), user=user, kind=Annotation.Kind.RANKING)))
        .filter(n_rankers__lt=policy.overlap, n_held__lt=policy.overlap)
        .order_by("group_id")
    )


def held_lease(*, user, batch: Batch, now=None) -> Lease | None:
    """The live lease `user` holds on a group of `batch` and has not finished, if any."""
    now = now or timezone.now()
    return (Lease.objects.filter(user=user, group__batch=batch, completed_at=None, expires_at__gt=now)
            .select_related("group").order_by("taken_at").first())


# --- progress ---------------------------------------------------------------------------


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


def batch_review(batch: Batch, *, viewer: Viewer) -> BatchReview:
    """The batch's review progress; agreement with the grader and between annotators only
    where `viewer` may see the grader and other people's rankings of every group."""
    policy = AnnotationPolicy.of(batch)
    hidden = viewer.on_listing(batch)
    rows = (Annotation.objects.filter(group__batch=batch, kind=Annotation.Kind.RANKING)
            .order_by("version").values_list("group_id", "group__label", "user__username", "tiers"))
    latest: dict[tuple[int, str], list] = {}
    mixed_groups: set[int] = set()
    for group_pk, label, username, tiers in rows:
        latest[(group_pk, username)] = tiers
        if label == Group.Label.MIXED:
            mixed_groups.add(group_pk)
    graders = {} if hidden.grader else grader_rankings({group_pk for group_pk, _ in latest}, viewer=viewer)
    by_user: dict[str, list] = {}
    by_group: dict[int, list] = {}
    for (group_pk, username), tiers in latest.items():
        by_user.setdefault(username, []).append(group_pk)
        by_group.setdefault(group_pk, []).append(tiers)
    annotators = []
    for username, group_pks in sorted(by_user.items(), key=lambda item: (-len(item[1]), item[0])):
        pairs = [(latest[(g, username)], graders[g].tiers) for g in group_pks if g in graders]
        annotators.append(AnnotatorProgress(username, len(group_pks), summarise(pairs).kendall_tau))
    between = [] if hidden.others else [
        kendall_tau(a, b) for rankings in by_group.values() for a, b in combinations(rankings, 2)]
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
