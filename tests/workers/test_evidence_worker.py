"""Execution evidence through real worker processes: gathered before grading, resumed after a
worker is killed mid-pass, groups that share their runs gathered side by side, and a sandbox
that cannot run, or cannot reach the run folders, stopping the worker at start; a machine that
breaks mid-pass fails the pass saying so, never the candidates."""

import shutil
import tempfile
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from tests import evidencedata
from tests.factories import group as plain_group
from tests.workers.conftest import import_batch, wait_until
from webapp.evidence.services import evidence_launch, evidence_process, evidence_sweep
from webapp.grading.services import grading_launch
from webapp.models import EvidenceRun, Grading, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)

DONE, FAILED, QUEUED = GroupEvidence.Status.DONE, GroupEvidence.Status.FAILED, GroupEvidence.Status.QUEUED


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
    # Shown to every role: the store is named by its setting; the worker's log has its path.
    assert plain.reason == "no mirror of o/r in the codebase store $GAGAR_CODEBASES"
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


@pytest.fixture
def gate():
    """A folder for a worker's data folder, in one the sandbox's user may enter (pytest's own
    temporary folders are the test user's alone): close it (mode 700) to shut that user out."""
    root = Path(tempfile.mkdtemp(prefix="gagar-gate-", dir="/var/tmp"))
    root.chmod(0o755)
    (root / "gate").mkdir(mode=0o755)
    yield root / "gate"
    shutil.rmtree(root)


def test_a_sandbox_that_cannot_reach_the_run_folders_stops_the_worker_at_start_with_the_reason(
        gate, evidence_env, workers):
    gate.chmod(0o700)  # the sandbox's user (nobody) cannot pass: bwrap cannot bind the copy
    with pytest.raises(RuntimeError) as stopped:
        workers({**evidence_env, "GAGAR_DATA_DIR": str(gate / "data")})
    said = str(stopped.value)
    assert (f"execution evidence: the sandbox cannot run here: a trial run in the run folders "
            f"({gate / 'data' / 'evidence' / 'runs'}) did not pass") in said
    assert "Can't find source path" in said and "Permission denied" in said
    assert "the sandbox's user must be let through every folder above them (mode 755)" in said


def test_a_machine_that_breaks_mid_pass_fails_the_pass_saying_so_and_stores_no_outcome(
        tmp_path, gate, sandbox_python, evidence_env, workers, client, researcher):
    records = evidencedata.records("calc-1", sandbox_python, tmp_path / "calc")
    batch = import_batch(tmp_path, sandbox_python, "calc", records)
    workers({**evidence_env, "GAGAR_DATA_DIR": str(gate / "data")})
    gate.chmod(0o700)  # after the worker's check at start: every run's sandbox now fails to start
    launch = grading_launch(batch=batch, grader="heuristic")

    wait_until(lambda: not launch.run.gradings.exclude(status=Grading.Status.DONE).exists(), timeout=120,
               message=str(list(GroupEvidence.objects.values("status", "error"))))
    evidence = GroupEvidence.objects.get()
    said = ("the worker's machine could not run the candidates' code: the sandbox could not start the test "
            "command (not the candidates' doing; the worker's log has the detail)")
    assert (evidence.status, evidence.error, evidence.matrix) == (FAILED, said, None)
    assert not EvidenceRun.objects.exists()  # nothing of it is taken for a candidate's outcome
    client.force_login(researcher)
    page = client.get(reverse("group", args=[evidence.group_id])).content.decode()
    assert f"No execution evidence: the evidence pass failed: {said}".replace("'", "&#x27;") in page


FOUR = {tid: evidencedata.CANDIDATES[tid] for tid in ("good", "also_good", "breaks", "fails")}


def test_groups_that_share_their_runs_gathered_side_by_side_run_them_once_and_agree_with_one_worker(
        tmp_path, sandbox_python, evidence_env, workers):
    """Six groups with the same four candidates, two at a time: every run's key is the same in
    each. When the attempts shared a folder, each worker removed the other's copy mid-run: five
    of six passes failed (FileNotFoundError), and runs were stored as `refused` ("Unable to read
    current working directory") or `fail` for every later group to reuse."""
    records = [line for i in range(6)
               for line in evidencedata.records(f"same-{i}", sandbox_python, tmp_path / f"s{i}", candidates=FOUR)]
    batch = import_batch(tmp_path, sandbox_python, "same", records)
    pks = sorted(batch.groups.values_list("pk", flat=True))
    workers(evidence_env, concurrency=2)
    evidence_launch(group_pks=pks)

    wait_until(lambda: not GroupEvidence.objects.exclude(status=DONE).exclude(status=FAILED).exists(),
               timeout=240, message=str(list(GroupEvidence.objects.values("status", "error"))))
    assert list(GroupEvidence.objects.values_list("status", "error")) == [(DONE, "")] * 6
    side_by_side = {key: _said(outcome) for key, outcome in EvidenceRun.objects.values_list("key", "outcome")}
    assert {status for status, *_ in side_by_side.values()} == {"pass", "fail"}  # none refused, none broken
    matrices = [GroupEvidence.objects.get(pk=pk).matrix for pk in pks]
    assert all(matrix["runs"] == matrices[0]["runs"] for matrix in matrices)
    assert sum(GroupEvidence.objects.values_list("spent_s", flat=True)) == pytest.approx(
        sum(outcome["duration"] for outcome in EvidenceRun.objects.values_list("outcome", flat=True)))
    left = [p.name for p in (Path(settings.DATA_DIR) / "evidence" / "runs").iterdir() if p.name[:64] in side_by_side]
    assert left == []  # no copy, no lock (other tests' killed workers may have left theirs)

    # The same group again, run alone in this process from nothing stored: the same outcomes.
    EvidenceRun.objects.all().delete()
    GroupEvidence.objects.filter(pk=pks[0]).update(status=QUEUED, spent_s=0.0)
    assert evidence_process(group_id=pks[0]) == DONE
    assert _cells(GroupEvidence.objects.get(pk=pks[0]).matrix) == _cells(matrices[0])


def _said(outcome: dict) -> tuple:
    """What a run's outcome says of the candidate (its log and timing aside)."""
    return outcome["status"], outcome["tests"], outcome["reason"]


def _cells(matrix: dict) -> dict:
    """What each run of a matrix says, by suite and candidates."""
    return {(run["suite"], tuple(run["candidates"])): _said(run["outcome"]) for run in matrix["runs"]}
