"""Execution evidence through real worker processes: gathered before grading, resumed after a
worker is killed mid-pass, and a sandbox that cannot run stopping the worker at start."""


import pytest

from tests import evidencedata
from tests.factories import group as plain_group
from tests.workers.conftest import import_batch, wait_until
from webapp.evidence.services import evidence_sweep
from webapp.grading.services import grading_launch
from webapp.models import EvidenceRun, Grading, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)

DONE = GroupEvidence.Status.DONE


def test_a_worker_gathers_the_evidence_then_grades_with_it(tmp_path, sandbox_python, evidence_env, workers):
    records = evidencedata.records("calc-1", sandbox_python, tmp_path / "calc") + plain_group("plain-1", [1, 1, 0])
    batch = import_batch(tmp_path, sandbox_python, "calc", records)
    workers(evidence_env)
    launch = grading_launch(batch=batch, grader="heuristic")

    wait_until(lambda: not launch.run.gradings.exclude(status=Grading.Status.DONE).exists(), timeout=120,
               message=str(list(launch.run.gradings.values_list("status", "error"))))
    evidence = GroupEvidence.objects.get(group__group_id="calc-1")
    assert evidence.status == DONE and evidence.breaks_tests
    plain = GroupEvidence.objects.get(group__group_id="plain-1")  # names o/r at a commit: no mirror of it
    assert plain.status == GroupEvidence.Status.NONE
    assert plain.reason == f"no mirror of o/r in the codebase store {evidence_env['GAGAR_CODEBASES']}"
    grading = launch.run.gradings.get(group__group_id="calc-1")
    assert grading.claimed_at > evidence.finished_at  # it waited for the evidence
    assert grading.tiers[-1] == ["breaks"] or grading.tiers[-2] == ["breaks"]
    assert grading.flags["breaks"] == ["breaks_tests"]
    assert "existing: tests/test_ops.py::test_add" in grading.rationales["breaks"]


def test_a_pass_whose_worker_is_killed_goes_on_where_it_stopped(tmp_path, sandbox_python, evidence_env, workers):
    records = evidencedata.records("slow-1", sandbox_python, tmp_path / "slow", snapshot="slow")
    batch = import_batch(tmp_path, sandbox_python, "slow", records)
    worker = workers(evidence_env, log="first.log")
    grading_launch(batch=batch, grader="heuristic")
    evidence = GroupEvidence.objects.get()
    wait_until(lambda: EvidenceRun.objects.count() >= 4, timeout=120, message="no runs stored")
    worker.kill()
    before = dict(EvidenceRun.objects.values_list("key", "outcome"))

    wait_until(lambda: evidence_sweep().requeued == 1, timeout=30, every=0.5, message="not swept")
    workers(evidence_env, log="second.log")
    wait_until(lambda: GroupEvidence.objects.filter(status=DONE).exists(), timeout=120,
               tick=evidence_sweep, message=str(GroupEvidence.objects.values("status", "error")))
    evidence.refresh_from_db()
    assert evidence.attempts == 2
    after = dict(EvidenceRun.objects.values_list("key", "outcome"))
    assert {key: after[key] for key in before} == before
    assert len(after) == len({run["key"] for run in evidence.matrix["runs"]}) > len(before)
    # The second attempt ran only what was left: each run takes a second or more, so running
    # the stored ones again would have taken their seconds once more.
    left = sum(outcome["duration"] for key, outcome in after.items() if key not in before)
    again = sum(outcome["duration"] for outcome in before.values())
    took = (evidence.finished_at - evidence.claimed_at).total_seconds()
    assert again >= 4 and took < left + again / 2, (took, left, again)


def test_a_sandbox_that_cannot_run_stops_the_worker_at_start_with_the_reason(
        filesystem_broker, codebase_store, workers):
    env = {**filesystem_broker, "GAGAR_CODEBASES": str(codebase_store), "GAGAR_SANDBOX": "command",
           "GAGAR_SANDBOX_TEMPLATE": "no-such-runtime run --rm -v {workdir}:/work {image} {command}"}
    with pytest.raises(RuntimeError) as stopped:
        workers(env)
    assert ("execution evidence: the sandbox cannot run here: sandbox template: 'no-such-runtime' is not installed"
            in str(stopped.value))
