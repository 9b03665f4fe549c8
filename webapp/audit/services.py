"""Writes of auditing: make an audit set, give or change a verdict, mark a group as gold, and
recompute the dashboard's stored figures (the worker's task)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.utils import timezone

from webapp import derived
from webapp.audit import figures, refresh
from webapp.audit.sampling import Plan
from webapp.audit.selectors import corrected_ranking, may_audit, verified_ranking
from webapp.models import AuditItem, AuditSet, AuditVerdict, Batch, GoldGroup, Group
from webapp.rankings import Viewer

log = logging.getLogger(__name__)

NOTES_LIMIT = 4000  # characters


class AuditError(Exception):
    """A write that cannot be made; nothing was stored. `status` is the HTTP answer it maps to."""

    status = 400


class NotAllowed(AuditError):
    status = 403


def audit_set_create(*, name: str, plan: Plan, user) -> AuditSet:
    """Store the set `plan` draws: one item per group drawn, positions in group order."""
    if not may_audit(user):
        raise NotAllowed("only auditors and researchers make audit sets")
    drawn = plan.drawn()
    try:
        with transaction.atomic():
            audit_set = AuditSet.objects.create(
                name=name, batch=plan.source.batch, run=plan.source.run, grader_version=plan.source.grader_version,
                design=plan.design(), size=len(drawn), created_by=user)
            AuditItem.objects.bulk_create(
                AuditItem(audit_set=audit_set, group_id=a.group_pk, grading_id=a.grading_pk, position=n)
                for n, a in enumerate(drawn, start=1))
    except IntegrityError:
        if AuditSet.objects.filter(name=name).exists():
            raise AuditError(f"an audit set named {name!r} exists already") from None
        raise
    return audit_set


def verdict_save(*, item: AuditItem, auditor, verdict: str, categories: Sequence[str], notes: str) -> AuditVerdict:
    """Give or change `auditor`'s verdict on `item`. It records the ranking of the group they
    saved last since the set was made, if any, as their corrected ranking."""
    if not may_audit(auditor):
        raise NotAllowed("only auditors and researchers give verdicts")
    if verdict not in AuditVerdict.Verdict.values:
        raise AuditError(f"verdict: {verdict[:40]!r} is not one of {', '.join(AuditVerdict.Verdict.values)}")
    unknown = sorted(set(categories) - set(AuditVerdict.Category.values))
    if unknown:
        raise AuditError(f"error categories: unknown {', '.join(repr(c[:40]) for c in unknown)}")
    if verdict == AuditVerdict.Verdict.CORRECT and categories:
        raise AuditError("error categories: a correct grading has no errors; choose partly or wrong")
    notes = notes.strip()
    if len(notes) > NOTES_LIMIT:
        raise AuditError(f"notes: {len(notes)} characters; the limit is {NOTES_LIMIT}")
    if "\x00" in notes:
        raise AuditError("notes: contains a NUL character")
    corrected = corrected_ranking(item, auditor)
    fields = {"verdict": verdict, "notes": notes,
              "categories": [c for c in AuditVerdict.Category.values if c in set(categories)],
              "corrected_version": corrected.version if corrected is not None else None}
    row, _ = AuditVerdict.objects.update_or_create(item=item, auditor=auditor, defaults=fields)
    derived.figures_stale(item.group.batch_id, ("correctness",))  # its corrected ranking is a reference
    return row


def gold_mark(*, group: Group, user) -> GoldGroup:
    """Mark `group` as gold: its final ranking, a human one, is verified. Marking it again
    verifies the final ranking as it is now."""
    if not may_audit(user):
        raise NotAllowed("only auditors and researchers mark gold groups")
    ranking = verified_ranking(group, viewer=Viewer(user))  # one verifies only what one may see
    if ranking is None:
        raise AuditError(f"{group.group_id}: no human ranking to verify; rank the group first")
    row, _ = GoldGroup.objects.update_or_create(
        group=group, defaults={"annotation_version": ranking.version, "marked_by": user, "marked_at": timezone.now()})
    derived.figures_stale(group.batch_id, ("drift",))
    return row


def gold_unmark(*, group: Group, user) -> bool:
    """Take `group` out of the gold set; False if it was not in it."""
    if not may_audit(user):
        raise NotAllowed("only auditors and researchers change the gold set")
    deleted, _ = GoldGroup.objects.filter(group=group).delete()
    if deleted:
        derived.figures_stale(group.batch_id, ("drift",))
    return bool(deleted)


# --- the dashboard's stored figures (webapp.audit.refresh) ----------------------------------


def figures_refresh() -> None:
    """In a worker: bring every requested part of the dashboard's figures up to date (those
    stale: `figures`' functions compute and store only those), and clear the requests made
    before it read the data; parts requested meanwhile send the task again. Figures that
    cannot be computed (a bug, one batch's data too much) fail alone: their parts record why
    (figures.record_failure) and the others are computed; a lost database connection is
    raised, for the task to retry."""
    started = timezone.now()
    parts = refresh.requested()
    by_batch: dict[int | None, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for kind, batch_id, version in parts:
        by_batch[batch_id][kind].add(version)
    batches = Batch.objects.in_bulk([pk for pk in by_batch if pk is not None])
    for batch_id, kinds in by_batch.items():
        if batch_id is not None and batch_id not in batches:
            continue  # deleted since: its parts went with it
        batch = batches.get(batch_id)
        marks = figures.watermarks(batch)
        for computed, compute in _RECOMPUTES:
            if not any(kinds[kind] for kind in computed):
                continue
            try:
                compute(batch, kinds, marks)
            except (OperationalError, InterfaceError):
                raise
            except Exception as error:  # MemoryError included: one part's data must not stop the others'
                log.exception("audit figures (%s) of %s failed", ", ".join(computed), batch or "every batch")
                figures.record_failure(batch, [(kind, version) for kind in computed for version in kinds[kind]],
                                       error)
    derived.recomputed(derived.AUDIT_FIGURES, started)


def _ranking_figures(batch: Batch | None, kinds: dict[str, set[str]], marks) -> None:
    figures.ranking_figures(batch, sorted(kinds["agreement"] | kinds["gradings"]), marks=marks)


def _correctness_figures(batch: Batch | None, kinds: dict[str, set[str]], marks) -> None:
    figures.correctness_figures(batch, sorted(kinds["correctness"]), marks=marks)


def _verdict_figures(batch: Batch | None, kinds: dict[str, set[str]], marks) -> None:
    figures.verdict_figures(batch, sorted(kinds["verdicts"]), marks=marks)


def _gold_drift(batch: Batch | None, kinds: dict[str, set[str]], marks) -> None:
    figures.gold_drift(batch, figures.grader_versions(batch), marks=marks)


def _concordance(batch: Batch | None, kinds: dict[str, set[str]], marks) -> None:
    figures.annotator_concordance(batch, marks=marks)


# Each computes and stores parts of these kinds; one that fails leaves the others to be computed.
_RECOMPUTES = ((("correctness",), _correctness_figures), (("agreement", "gradings"), _ranking_figures),
               (("verdicts",), _verdict_figures), (("drift",), _gold_drift), (("concordance",), _concordance))
