"""A batch whose groups reach their advantages every way there is: a grader's ranking, a
human's, rankings that cannot apply (and why), and none."""

from tests.factories import group
from tests.webapp.annotationdata import grade, save
from tests.webapp.reviewdata import import_batch, records
from webapp.models import Batch, Group

# group id -> (source, source_reason) the export must report
EXPECTED = {
    "task-1": ("grader", "redistributed"),
    "task-2": ("human", "redistributed"),
    "task-3": ("fallback", "ranking_mismatch"),
    "task-4": ("fallback", "equal_factors"),
    "task-5": ("none", "no_ranking"),
    "solo": ("fallback", "single_pass"),
}


def ranked_batch(tmp_path, user, name="ranked") -> Batch:
    """task-N: t1..t5 pass, t6 fails (tests.webapp.reviewdata); solo: t1 passes, t2, t3 fail."""
    recs = [r for i in range(1, 6) for r in records(f"task-{i}")] + group("solo", [1, 0, 0])
    batch = import_batch(tmp_path, recs, name=name)
    groups = {g.group_id: g for g in Group.objects.filter(batch=batch)}
    grade(groups["task-1"], flags={"t4": ["debug_leftovers", "edits_tests"]})
    grade(groups["task-2"])
    save(groups["task-2"], user, [["t5"], ["t1", "t2"], ["t3"], ["t4"]], flags={"t3": ["reward_hacking"]})
    grade(groups["task-3"], [["t1"], ["t2", "t3"], ["t4"]])  # leaves out t5, which passed
    grade(groups["task-4"], [["t1", "t2", "t3", "t4", "t5"]])
    grade(groups["solo"], [["t1"]], flags={}, rationales={})
    return batch
