"""Reads of the API: tokens, a batch's status, waiting for grading, an online step's rewards."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable

from django.db.models import Count

from webapp.advantages.chunks import MISSING_SCORES, RANKING_MISMATCH, AdvantageChunk
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.selectors import advantage_chunks
from webapp.batches.selectors import label_counts
from webapp.exports.selectors import advantages_ready
from webapp.grading.selectors import batch_grading_status, graded_share
from webapp.models import ApiToken, Batch, Export, Grading, Group
from webapp.rankings import Viewer

ACTIVE = (Grading.Status.QUEUED, Grading.Status.RUNNING)
# Polling the database while a request waits: an online step is graded in a fraction of a
# second, and a poll is one indexed query, so often.
POLL_FIRST_S, POLL_MAX_S = 0.01, 0.025


def token_digest(value: str) -> str:
    """How a token is stored and looked up: tokens are random and long, so a plain sha256 will do."""
    return hashlib.sha256(value.encode()).hexdigest()


def token_by_value(value: str) -> ApiToken | None:
    """The token row for a presented token (revoked or not), with its user."""
    return ApiToken.objects.select_related("user").filter(digest=token_digest(value)).first()


def user_tokens(user):
    return ApiToken.objects.filter(user=user)


def export_active(export: Export) -> bool:
    return Export.objects.filter(pk=export.pk, status__in=(Export.Status.QUEUED, Export.Status.RUNNING)).exists()


def grading_active(batch: Batch) -> bool:
    """Whether any grading of `batch` is queued or running: while one is, its advantages
    are held back, by the rule an export launch follows (`advantages_ready`)."""
    return not advantages_ready(batch)


def wait_until(done: Callable[[], bool], *, seconds: float) -> bool:
    """Poll `done()` for up to `seconds`; return its last answer."""
    deadline = time.monotonic() + seconds
    interval = POLL_FIRST_S
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(interval, left))
        interval = min(interval * 1.5, POLL_MAX_S)
    return True


def batch_status(batch: Batch, *, viewer: Viewer) -> dict:
    """The batch's counts and grading runs, as the grading panel shows them to `viewer`."""
    runs = batch_grading_status(batch, viewer=viewer)
    gradings = dict.fromkeys(Grading.Status.values, 0)
    gradings.update(Grading.objects.filter(run__batch=batch).order_by().values_list("status")
                    .annotate(n=Count("id")))
    labels = {label: 0 for label in Group.Label.values}
    labels.update(label_counts([batch])[batch.pk])
    return {
        "batch": batch,
        "labels": labels,
        **graded_share(batch),
        "gradings": gradings,
        "grading_active": bool(gradings[Grading.Status.QUEUED] or gradings[Grading.Status.RUNNING]),
        "runs": [{"id": r.run.pk, "grader": r.run.grader, "grader_version": r.grader_version,
                  "created_at": r.run.created_at, "state": r.state, "cancelled_at": r.run.cancelled_at,
                  "cancelled_by": r.run.cancelled_by.get_username() if r.run.cancelled_by else None,
                  "counts": r.counts,
                  "failures": [{"group_id": f["group__group_id"], "error": f["error"], "attempts": f["attempts"]}
                               for f in r.failures]}
                 for r in runs],
    }


def step_result(batch: Batch, *, viewer: Viewer) -> dict:
    """Every trajectory's reward for the trainer under the batch's config, and each group's
    state: graded (a grader's or a human's ranking applies), pending (a grading of it is
    queued or running: what `grading_active` waits for), failed (with the reason), cancelled
    (its grading's run was cancelled before it was graded), or not_mixed (nothing to rank).
    The values are the advantages export's (`advantage_chunks`), `corrected_reward`
    included, read from its columns into the answer's objects."""
    config = parse_advantage_config(batch.advantage_config)
    chunks = list(advantage_chunks(batch, viewer=viewer, config=config))
    active: set[str] = set()
    finished: dict[str, tuple[str, str]] = {}  # group id -> (status, error) of its latest finished grading
    for group_id, status, error in (Grading.objects.filter(run__batch=batch).order_by("group__group_id", "-pk")
                                    .values_list("group__group_id", "status", "error")):
        if status in ACTIVE:
            active.add(group_id)
        else:
            finished.setdefault(group_id, (status, error))
    return {
        "batch": batch.name,
        "batch_id": batch.pk,
        "complete": not active,
        "config": config.as_dict(),
        "groups": [_group_state(group_id, label, source, reason, group_id in active, finished.get(group_id))
                   for chunk in chunks
                   for group_id, label, source, reason in zip(chunk.group_ids, chunk.label, chunk.source,
                                                              chunk.source_reason, strict=True)],
        "trajectories": [row for chunk in chunks for row in _trajectories(chunk)],
    }


def _trajectories(chunk: AdvantageChunk) -> list[dict]:
    """The answer's object per trajectory of `chunk`, from its columns."""
    corrections = [None if math.isnan(r) else r for r in chunk.corrected_reward.tolist()]
    advantages = chunk.advantage.tolist()
    return [{"group_id": chunk.group_ids[g], "trajectory_id": tid, "reward": reward, "corrected_reward": corrected,
             "passed": passed, "grpo_advantage": grpo, "advantage": advantage, "source": chunk.source[g],
             "reward_for_trainer": advantage}
            for g, tid, reward, corrected, passed, grpo, advantage in zip(
                chunk.group_index.tolist(), chunk.trajectory_ids, chunk.reward.tolist(), corrections,
                chunk.passed.tolist(), chunk.grpo_advantage.tolist(), advantages, strict=True)]


def _group_state(group_id: str, label: str, source: str, source_reason: str, active: bool,
                 finished: tuple[str, str] | None) -> dict:
    """A group's state from its label and its advantages' source, whether a grading of it is
    queued or running, and its latest finished grading (status, error)."""
    state = {"group_id": group_id, "label": label}
    if label != Group.Label.MIXED:
        return {**state, "state": "not_mixed", "reason": f"{label}: no pass/fail mix to rank"}
    if active:
        return {**state, "state": "pending", "reason": "its grading is queued or running"}
    if source in ("human", "grader"):
        return {**state, "state": "graded", "reason": f"ranked by the {source}"}
    if source == "fallback" and source_reason not in (RANKING_MISMATCH, MISSING_SCORES):
        # A ranking that leaves GRPO's advantages as they are (one passing trajectory, ...).
        return {**state, "state": "graded", "reason": f"ranked; GRPO's advantages stand: {source_reason}"}
    if source == "fallback":
        return {**state, "state": "failed", "reason": f"the ranking cannot apply: {source_reason}"}
    if finished is None:
        return {**state, "state": "failed", "reason": "no grading was launched for it"}
    status, error = finished
    if status == Grading.Status.CANCELLED:
        return {**state, "state": "cancelled", "reason": f"grading cancelled: {error}"}
    return {**state, "state": "failed", "reason": f"grading failed: {error}"}
