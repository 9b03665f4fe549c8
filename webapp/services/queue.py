"""The annotation queue: the next group for an annotator, held by a soft lease.

A batch's policy says which mixed groups enter the queue (any of: every group
not yet reviewed, ungraded, grader failed, low grader confidence, a seeded
random sample). A group leaves it once k annotators (the policy's overlap)
have ranked it. Each group has k lease slots; (group, slot) is unique in the
database, so however many annotators ask at the same instant no more than k
hold a group. A live lease keeps the group from others until it expires; a
lease whose holder saved is kept for good. The lease is soft: the group page
tells others who holds it but does not lock them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Mod
from django.utils import timezone

from webapp.models import Annotation, AnnotationPolicy, Batch, Grading, Group, Lease
from webapp.services.annotations import NotAllowed, may_annotate

CANDIDATES = 50  # groups tried per look at the queue
# The sample draws id -> (id * multiplier + offset(seed)) mod a prime: it spreads ids evenly
# over [0, modulus), the seed shifts the whole draw, and any database computes it.
SAMPLE_MODULUS = 1_000_003
SAMPLE_MULTIPLIER = 2_654_435_761


def _sample_offset(seed: int) -> int:
    return (seed * 2_246_822_519 + 3_266_489_917) % SAMPLE_MODULUS


@dataclass(frozen=True)
class Assignment:
    group: Group
    lease: Lease
    resumed: bool  # the user already held it


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


def next_group_for(*, user, batch: Batch, skip=()) -> Assignment | None:
    """The group `user` should rank next, leased to them; None when the queue has none for
    them. A live unfinished lease comes back first (its lease renewed), so asking again never
    hoards groups; `skip` (group pks) leaves some out of this answer."""
    if not may_annotate(user):
        raise NotAllowed("only annotators and researchers take groups from the queue")
    policy = AnnotationPolicy.of(batch)
    now = timezone.now()
    until = now + timedelta(minutes=policy.lease_minutes)
    held = held_lease(user=user, batch=batch, now=now)
    if held is not None and held.group_id not in skip:
        Lease.objects.filter(pk=held.pk).update(expires_at=until)
        held.expires_at = until
        return Assignment(held.group, held, resumed=True)
    for _ in range(3):  # a full look finds every candidate taken only while others race us
        candidates = list(queue_groups(user=user, batch=batch, policy=policy, now=now)
                          .exclude(pk__in=list(skip))[:CANDIDATES])
        if not candidates:
            return None
        for group in candidates:
            lease = _take(group, user, policy.overlap, now, until)
            if lease is not None:
                return Assignment(group, lease, resumed=False)
        now = timezone.now()
    return None


def _take(group: Group, user, k: int, now, until) -> Lease | None:
    """A lease slot of `group` for `user`: a free one, or one whose lease expired."""
    own = Lease.objects.filter(group=group, user=user).first()
    if own is not None:
        if own.completed_at is not None:
            return None
        Lease.objects.filter(pk=own.pk).update(taken_at=now, expires_at=until)
        own.taken_at, own.expires_at = now, until
        return own
    for slot in range(k):
        try:
            with transaction.atomic():
                return Lease.objects.create(group=group, slot=slot, user=user, taken_at=now, expires_at=until)
        except IntegrityError:
            pass
        # the slot is taken: take it over if its lease ran out (the update re-checks that under the row lock)
        if Lease.objects.filter(group=group, slot=slot, completed_at=None, expires_at__lte=now).update(
                user=user, taken_at=now, expires_at=until):
            return Lease.objects.get(group=group, slot=slot)
    return None


def lease_release(*, group: Group, user) -> bool:
    """Give back `user`'s unfinished lease on `group`; whether there was one."""
    deleted, _ = Lease.objects.filter(group=group, user=user, completed_at=None).delete()
    return bool(deleted)
