"""Reads of exports: a batch's list, the path of one finished export's file, what the panel
warns of beside one, whether a batch's advantages may be exported now, and why an export's
groups went without a ranking."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from webapp.models import Batch, Export, Grading
from webapp.rankings import CHUNK

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE,
                                            Grading.Status.FAILED, Grading.Status.CANCELLED)
# Why a mixed group's advantages are GRPO's, no ranking redistributing them, as a manifest counts them.
UNGRADED = ("grading_running", "never_graded", "grading_failed", "grading_cancelled", "fell_back")


def exports_root() -> Path:
    """Where export folders live: DATA_DIR/exports/<export id>/."""
    return settings.DATA_DIR / "exports"


def batch_exports(batch: Batch, *, limit: int = 20) -> list[Export]:
    """The latest `limit` exports of `batch`, newest first."""
    return list(Export.objects.filter(batch=batch).select_related("created_by")[:limit])


def export_warnings(export: Export) -> list[str]:
    """What the panel says beside a finished export whose files hold a surprise: a grader SFT
    split that put every exported task in validation, leaving `train.jsonl` empty."""
    from webapp.exports.sft import EXAMPLES, TRAIN  # the SFT export's own module

    sizes = {f["name"]: f["bytes"] for f in export.files}
    if export.kind == Export.Kind.SFT and export.status == Export.Status.DONE and sizes.get(EXAMPLES[TRAIN]) == 0:
        return [f"{EXAMPLES[TRAIN]} is empty: the split by task put every exported group in validation. With this "
                "few tasks, export again with another seed or a smaller validation_share."]
    return []


def export_file(export: Export, name: str) -> Path:
    """The path of the file `name` of a finished export; LookupError if it has none such."""
    if export.status != Export.Status.DONE:
        raise LookupError(f"export #{export.pk} is {export.status}, not done")
    if name not in {f["name"] for f in export.files}:
        raise LookupError(f"export #{export.pk} has no file named {name!r}")
    return exports_root() / export.folder / name


def advantages_ready(batch: Batch) -> bool:
    """Whether `batch`'s advantages may be exported now: the one rule that the export launch
    (the page's and the API's) and the API's advantages endpoint follow. Not while a grading
    of the batch is queued or running: its group would go out with GRPO's advantages while
    its ranking is on the way, and nothing in its rows would say so."""
    return not unfinished_gradings(batch).exists()


def unfinished_gradings(batch: Batch):
    """The gradings of `batch` that are queued or running."""
    return Grading.objects.filter(run__batch=batch, status__in=(QUEUED, RUNNING))


def ungraded_reasons(batch: Batch, group_ids: Sequence[str]) -> dict[str, str]:
    """Why each of `group_ids`, groups of `batch` without a ranking, has none (one of
    UNGRADED but "fell_back"): a grading of it is queued or running, its latest finished
    grading failed or was cancelled, or it was never graded."""
    active, latest = set(), {}
    for start in range(0, len(group_ids), CHUNK):
        rows = (Grading.objects.filter(group__batch=batch, group__group_id__in=group_ids[start:start + CHUNK])
                .order_by("group__group_id", "-pk").values_list("group__group_id", "status"))
        for group_id, status in rows:
            if status in (QUEUED, RUNNING):
                active.add(group_id)
            else:
                latest.setdefault(group_id, status)
    # A group whose latest grading is done has a ranking, unless that grading finished
    # after the export read the group's rankings: it was running then.
    finished = {DONE: "grading_running", FAILED: "grading_failed", CANCELLED: "grading_cancelled"}
    return {group_id: "grading_running" if group_id in active else finished.get(latest.get(group_id), "never_graded")
            for group_id in group_ids}
