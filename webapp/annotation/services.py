"""Human rankings: save, revert or accept; and the queue's leases.

Annotations are only ever inserted. A save names the head of the chain its
editor started from (`based_on_version`); if that chain moved on meanwhile
the save is refused with a Conflict that carries the newer row. The check
is made inside the transaction, under a row lock on the group that queues
the group's saves one after another, so saves to different chains never
turn each other away. The database backs the check: a chain cannot hold two
rows based on the same version, so two saves that both passed the check
still cannot both land (the loser gets the same Conflict).

Chains: with an overlap of 1 everyone edits the group's final chain; with
k-way overlap each annotator ranks in a chain of their own, and a
researcher accepts one of them into the final chain (`ranking_revert`).

The queue hands a group to an annotator under a soft lease. Each group has
k lease slots; (group, slot) is unique in the database, so however many
annotators ask at the same instant no more than k hold a group. A live lease
keeps the group from others until it expires; a lease whose holder saved is
kept for good. The lease is soft: the group page tells others who holds it
but does not lock them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from grading.rankings import FLAGS, InvalidRanking, validate_ranking
from grading.sft import grader_text
from webapp import derived
from webapp.annotation.selectors import held_lease, queue_groups
from webapp.models import Annotation, AnnotationPolicy, Batch, Grading, Group, Lease, Trajectory
from webapp.rankings import corrected_passing
from webapp.roles import RESEARCHER, has_role, may_annotate
from webapp.triage import triage_refresh

RATIONALE_LIMIT = 4000  # characters, per trajectory and for the group
CANDIDATES = 50  # groups tried per look at the queue


class AnnotationError(Exception):
    """A save that cannot be made; `status` is the HTTP answer it maps to."""

    status = 400


class InvalidAnnotation(AnnotationError):
    """Input that is not a valid ranking of the group: nothing was stored."""


class NotAllowed(AnnotationError):
    status = 403


class Conflict(AnnotationError):
    """The chain moved on since the editor opened: `newer` is its head now."""

    status = 409

    def __init__(self, message: str, *, newer: Annotation | None, based_on_version: int):
        super().__init__(message)
        self.newer = newer
        self.based_on_version = based_on_version


def chain_head(group: Group, *, independent: bool, user=None) -> Annotation | None:
    rows = Annotation.objects.filter(group=group, independent=independent)
    if independent:
        rows = rows.filter(user=user)
    return rows.select_related("user").order_by("-version").first()


def ranking_save(*, group: Group, user, tiers: Sequence[Sequence[str]], flags: Mapping[str, Sequence[str]],
                 rationales: Mapping[str, str], group_rationale: str, based_on_version: int,
                 grading_id: int | None, verdicts: Mapping[str, Mapping] | None = None) -> Annotation:
    """Store `user`'s ranking of `group` as a new version of the chain they edit.

    `verdicts` overrides test verdicts, {trajectory id: {"passed": bool, "reason": text}}:
    the ranking then ranks exactly the trajectories that pass after the correction."""
    if not may_annotate(user):
        raise NotAllowed("only annotators and researchers rank groups")
    tested = dict(Trajectory.objects.filter(group=group).order_by("trajectory_id")
                  .values_list("trajectory_id", "passed"))
    verdicts = _verdicts(verdicts or {}, tested)
    passing = corrected_passing(tested, verdicts)
    flags = {tid: sorted(set(names), key=_flag_order) for tid, names in flags.items() if names}
    try:
        tiers = validate_ranking(tiers, passing, flags)
    except InvalidRanking as error:
        raise InvalidAnnotation(str(error)) from None
    rationales = _rationales(rationales, passing)
    group_rationale = _text("the group's rationale", group_rationale)
    grading = _grading(group, grading_id)
    policy = AnnotationPolicy.of(group.batch)
    return _insert(group=group, user=user, independent=policy.independent, based_on_version=based_on_version,
                   kind=Annotation.Kind.RANKING, tiers=[list(t) for t in tiers], flags=flags,
                   rationales=rationales, group_rationale=group_rationale, grading=grading, verdicts=verdicts)


def sft_unexportable(annotation: Annotation) -> list[str]:
    """The ranked trajectories that keep `annotation` out of the grader-SFT export: the grader
    must give a rationale for each one the tests pass (docs/grader-sft.md), so an export leaves
    the group out while any of them has none (or only text the grader's alphabet drops)."""
    tested = dict(Trajectory.objects.filter(group_id=annotation.group_id).values_list("trajectory_id", "passed"))
    # one the tests fail but a human passed is left out of the answer: it needs none
    return [tid for tier in annotation.tiers or () for tid in tier
            if tested.get(tid) and not grader_text(annotation.rationales.get(tid, ""))]


def ranking_revert(*, group: Group, user, to_version: int, based_on_version: int) -> Annotation:
    """Make version `to_version` the group's final ranking again, as a new version of the
    final chain: a revert (an earlier final version; 0 hands the group back to the grader)
    or the acceptance of an independent ranking. Researchers only."""
    if not has_role(user, RESEARCHER):
        raise NotAllowed("only researchers revert or accept rankings")
    head = chain_head(group, independent=False)
    if head is not None and head.version == to_version:
        raise InvalidAnnotation(f"version {to_version} is the final ranking already")
    if to_version == 0:
        if head is None or head.tiers is None:
            raise InvalidAnnotation("the grader's ranking is the final ranking already")
        return _insert(group=group, user=user, independent=False, based_on_version=based_on_version,
                       kind=Annotation.Kind.REVERT, reverted_to=0, tiers=None)
    source = Annotation.objects.filter(group=group, version=to_version).first()
    if source is None:
        raise InvalidAnnotation(f"this group has no version {to_version}")
    return _insert(
        group=group, user=user, independent=False, based_on_version=based_on_version,
        kind=Annotation.Kind.ACCEPT if source.independent else Annotation.Kind.REVERT, reverted_to=to_version,
        tiers=source.tiers, flags=source.flags, rationales=source.rationales,
        group_rationale=source.group_rationale, grading_id=source.grading_id, verdicts=source.verdicts,
    )


def _insert(*, group: Group, user, independent: bool, based_on_version: int, **fields) -> Annotation:
    try:
        with transaction.atomic():
            # The group's row lock queues the saves of this group (SQLite's write lock does the same):
            # each reads its chain head and the group's last version after the one before it committed,
            # so a save to another chain can never take our version number, and a stale base is seen.
            Group.objects.select_for_update(no_key=True).get(pk=group.pk)
            head = chain_head(group, independent=independent, user=user)
            _check_base(head, based_on_version)
            top = Annotation.objects.filter(group=group).aggregate(top=Max("version"))["top"] or 0
            annotation = Annotation.objects.create(
                group=group, user=user, independent=independent, version=top + 1,
                based_on_version=based_on_version, **fields)
            if annotation.kind == Annotation.Kind.RANKING:
                _complete_lease(group, user)
            triage_refresh([group.pk])
            # The dashboard's figures against people: a ranking, and the lucky passes its verdicts mark.
            derived.figures_stale(group.batch_id, ("correctness", "agreement", "concordance"))
            derived.batch_figures_stale(group.batch_id)  # its step's overrides and agreement, its advantages
            return annotation
    except IntegrityError:
        # The constraints back the check: a save based on the same version of this chain landed
        # although the check passed. Anything else is a broken invariant and must surface.
        _check_base(chain_head(group, independent=independent, user=user), based_on_version)
        raise


def _check_base(head: Annotation | None, based_on_version: int) -> None:
    current = head.version if head is not None else 0
    if based_on_version == current:
        return
    if head is None:
        raise Conflict(f"you started from version {based_on_version}, which this group does not have",
                       newer=None, based_on_version=based_on_version)
    when = timezone.localtime(head.created_at).strftime("%Y-%m-%d %H:%M:%S")
    started = f"version {based_on_version}" if based_on_version else "no saved version"
    raise Conflict(
        f"{head.user.get_username()} saved version {head.version} at {when} UTC, after you started editing "
        f"(from {started}). Nothing was overwritten: compare the two rankings and save yours again if it "
        f"should replace theirs.",
        newer=head, based_on_version=based_on_version)


def _complete_lease(group: Group, user) -> None:
    """The saver's queue slot is done for good; a save made outside the queue takes one too,
    so the queue counts it among the group's k annotators."""
    now = timezone.now()
    if Lease.objects.filter(group=group, user=user).update(completed_at=now):
        return
    taken = set(Lease.objects.filter(group=group).values_list("slot", flat=True))
    slot = next(n for n in range(len(taken) + 1) if n not in taken)
    try:
        with transaction.atomic():
            Lease.objects.create(group=group, slot=slot, user=user, taken_at=now, expires_at=now, completed_at=now)
    except IntegrityError:
        pass  # someone took that slot this instant; the queue also counts the group's rankers


def _flag_order(name: str) -> int:
    return FLAGS.index(name) if name in FLAGS else len(FLAGS)


def _text(what: str, text) -> str:
    if not isinstance(text, str):
        raise InvalidAnnotation(f"{what} must be text")
    text = text.strip()
    if len(text) > RATIONALE_LIMIT:
        raise InvalidAnnotation(f"{what} has {len(text)} characters; the limit is {RATIONALE_LIMIT}")
    if "\x00" in text:
        raise InvalidAnnotation(f"{what} contains a NUL character")
    return text


def _rationales(rationales: Mapping[str, str], passing: Sequence[str]) -> dict[str, str]:
    known = set(passing)
    unknown = sorted(set(rationales) - known)
    if unknown:
        raise InvalidAnnotation(f"rationales for ids that are not passing trajectories: {', '.join(unknown)}")
    out = {}
    for tid, text in rationales.items():
        text = _text(f"the rationale of {tid}", text)
        if text:
            out[tid] = text
    return out


def _verdicts(verdicts: Mapping[str, Mapping], tested: Mapping[str, bool]) -> dict[str, dict]:
    """Overrides of the tests' verdicts (`tested`, by id), checked: each names a trajectory of
    the group, turns its verdict around and says why."""
    out = {}
    for tid, verdict in sorted(verdicts.items()):
        if tid not in tested:
            raise InvalidAnnotation(f"a verdict for {tid}, which is not a trajectory of this group")
        if not isinstance(verdict, Mapping) or not isinstance(verdict.get("passed"), bool):
            raise InvalidAnnotation(f"the verdict of {tid} must say whether it passes")
        if verdict["passed"] == tested[tid]:
            raise InvalidAnnotation(f"{tid} {'passes' if tested[tid] else 'fails'} its tests already: "
                                    f"there is no verdict to override")
        reason = _text(f"the reason for overriding the verdict of {tid}", verdict.get("reason", ""))
        if not reason:
            raise InvalidAnnotation(f"say why {tid} {'passes' if verdict['passed'] else 'does not pass'} "
                                    f"although its tests say otherwise")
        out[tid] = {"passed": verdict["passed"], "reason": reason}
    return out


def _grading(group: Group, grading_id: int | None) -> Grading | None:
    if grading_id is None:
        return None
    grading = Grading.objects.filter(pk=grading_id, group=group).first()
    if grading is None:
        raise InvalidAnnotation(f"grading {grading_id} is not a grading of this group")
    return grading


# --- queue leases -----------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    group: Group
    lease: Lease
    resumed: bool  # the user already held it


def lease_next_group(*, user, batch: Batch, skip=()) -> Assignment | None:
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
                triage_refresh([group.pk])
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
    triage_refresh([group.pk])
    return bool(deleted)
