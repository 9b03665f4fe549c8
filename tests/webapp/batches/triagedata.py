"""Data for the triage tests: a normal mixed group and one whose passing trajectories all
edit the tests, graded by the heuristic grader through the worker's own code."""

from dataclasses import replace

from grading.cases import Grade, GroupCase
from grading.graders.heuristic import HeuristicGrader
from tests.factories import rollout
from tests.webapp.reviewdata import CLEAN, DEBUG, WRONG, file_patch, import_batch, records
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.models import Batch

TEST_EDIT = file_patch("tests/test_mod.py", ["    assert True"], ["    assert f(1) == 2"], start=3)


def edits_tests_records(group_id: str) -> list[dict]:
    """A mixed group: c1 and c2 pass by weakening the test (c2 also fixes f), c3 fails."""
    out = [rollout(group_id, "c1", 1.0, patch=TEST_EDIT), rollout(group_id, "c2", 1.0, patch=CLEAN + TEST_EDIT),
           rollout(group_id, "c3", 0.0, patch=WRONG)]
    out[0]["task"] = {"id": group_id, "statement": "Fix f.", "repo": "o/r", "base_commit": "b" * 40}
    return out


def triage_batch(tmp_path, name="triage", extra=(), baselines=False) -> Batch:
    """task-1 (t1..t5 pass, t6 fails), cheat-1 (c1, c2 pass editing tests, c3 fails),
    task-N groups like task-1 for each N in `extra`, and with `baselines` split-1 and tie-1
    (`baselines_records`)."""
    recs = records("task-1") + edits_tests_records("cheat-1") + [r for n in extra for r in records(f"task-{n}")]
    recs += baselines_records() if baselines else []
    return import_batch(tmp_path, recs, name=name)


class ConfidentGrader(HeuristicGrader):
    """The heuristic grader's ranking with the confidence `confidences` gives its group id,
    as a grader that measures its confidence reports it."""

    name = "confident"

    def __init__(self, *, confidences: dict[str, float]):
        self.confidences = confidences

    def rank(self, group: GroupCase) -> Grade:
        return replace(super().rank(group), confidence=self.confidences[group.group_id])


def grade_with(batch: Batch, grader: str = "heuristic", config: dict | None = None):
    """A run over the batch, processed here by the worker's code (the broker is not involved)."""
    run = grading_launch(batch=batch, grader=grader, config=config, regrade=True).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    return run


def grade_with_heuristic(batch: Batch):
    return grade_with(batch)


def baselines_records() -> list[dict]:
    """split-1: s1 and s2 make the same change with a debug print (the consensus), s3 the
    clean fix (the shortest), s4 fails; tie-1: u1..u5 make the same clean fix, u6 fails."""
    out = [rollout("split-1", "s1", 1.0, patch=DEBUG), rollout("split-1", "s2", 1.0, patch=DEBUG),
           rollout("split-1", "s3", 1.0, patch=CLEAN), rollout("split-1", "s4", 0.0, patch=WRONG)]
    out += [rollout("tie-1", f"u{i}", 1.0, patch=CLEAN) for i in range(1, 6)] + [
        rollout("tie-1", "u6", 0.0, patch=WRONG)]
    for group_id, first in (("split-1", 0), ("tie-1", 4)):
        out[first]["task"] = {"id": group_id, "statement": "Fix f.", "repo": "o/r", "base_commit": "b" * 40}
    return out
