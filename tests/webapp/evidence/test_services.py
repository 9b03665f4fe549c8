"""The evidence pass called in this process, as a worker calls it: launched with a grading,
run in the real sandbox (bwrap), stored per group and per run, and read by the heuristic."""

import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests import evidencedata
from tests.factories import write_jsonl
from webapp.cases import group_cases
from webapp.evidence.services import evidence_launch, evidence_process, evidence_sweep, workroot
from webapp.grading.services import grading_launch, gradings_release, gradings_sweep
from webapp.grading.worker import gradings_process
from webapp.models import Batch, EvidenceRun, Grading, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)

DONE, NONE, QUEUED = GroupEvidence.Status.DONE, GroupEvidence.Status.NONE, GroupEvidence.Status.QUEUED



@pytest.fixture
def sent(monkeypatch):
    """The messages services send, by kind: (ids, queue), instead of a broker."""
    messages = []

    def enqueue(work, ids, queue, *, countdown=None):
        messages.append((work.kind, list(ids), queue))
        return 1

    monkeypatch.setattr("webapp.work.enqueue", enqueue)
    return messages


@pytest.fixture
def evidence_on(settings, tmp_path, sandbox_python):
    settings.GAGAR_CODEBASES = str(evidencedata.store(tmp_path / "store"))
    settings.GAGAR_SANDBOX_PATHS = [str(sandbox_python.parents[2])]
    return settings


def import_group(tmp_path, sandbox_python, name="calc", **options):
    path = write_jsonl(tmp_path / f"{name}.jsonl", evidencedata.records(f"{name}-1", sandbox_python, tmp_path / name,
                                                                        **options))
    call_command("import_rollouts", str(path), batch=name, verbosity=0)
    batch = Batch.objects.get(name=name)
    return batch, batch.groups.get()


def test_a_group_with_a_codebase_gets_its_matrix_and_its_grading_waits_for_it(
        evidence_on, tmp_path, sandbox_python, sent):
    batch, group = import_group(tmp_path, sandbox_python)
    launch = grading_launch(batch=batch, grader="heuristic")
    assert GroupEvidence.objects.get(group=group).status == QUEUED
    assert [kind for kind, *_ in sent] == ["evidence"]  # sent once the launch commits; its grading waits

    grading = launch.run.gradings.get()
    assert gradings_process(grading_ids=[grading.pk]).claimed == []  # nor claimed, should a message come
    assert gradings_sweep(resend_after=0).sent == 0  # nor swept
    grading.refresh_from_db()
    assert (grading.status, grading.sent_at) == (Grading.Status.QUEUED, None)

    assert evidence_process(group_id=group.pk) == DONE
    evidence = GroupEvidence.objects.get(group=group)
    assert evidence.breaks == {"breaks": [["existing", "tests/test_ops.py::test_add"]]}
    assert evidence.breaks_tests is True
    assert set(evidence.flaky) == {"no_effect"}  # the reward passed it; its reward tests fail here
    assert evidence.codebase.startswith("snapshot:calc@")
    runs = {run["suite"]: run for run in evidence.matrix["runs"] if "breaks" in run["candidates"]}
    assert runs["existing"]["outcome"]["tests"] == {"tests/test_ops.py::test_add": "fail",
                                                    "tests/test_ops.py::test_sub": "pass"}
    assert EvidenceRun.objects.count() == len(evidence.matrix["runs"])

    gradings_release(group_pks=[group.pk])
    assert sent[-1][:2] == ("grading", [grading.pk])
    assert gradings_process(grading_ids=[grading.pk]).done == [grading.pk]
    grading.refresh_from_db()
    assert set(grading.tiers[-1]) | set(grading.tiers[-2]) == {"breaks", "no_effect"}  # ranked last
    assert "breaks_tests" in grading.flags["breaks"]
    assert "tests/test_ops.py::test_add" in grading.rationales["breaks"]
    assert "its reward tests fail here" in grading.rationales["no_effect"]


def test_a_second_pass_over_the_same_runs_runs_nothing_again(evidence_on, tmp_path, sandbox_python, sent):
    batch, group = import_group(tmp_path, sandbox_python)
    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == DONE
    first = dict(EvidenceRun.objects.values_list("key", "created_at"))
    spent = GroupEvidence.objects.get(group=group).spent_s
    assert spent > 0

    other, copy = import_group(tmp_path, sandbox_python, name="again")  # the same candidates, another batch
    evidence_launch(group_pks=[copy.pk])
    assert evidence_process(group_id=copy.pk) == DONE
    assert dict(EvidenceRun.objects.values_list("key", "created_at")) == first
    assert GroupEvidence.objects.get(group=copy).spent_s == 0.0
    assert GroupEvidence.objects.get(group=copy).breaks == GroupEvidence.objects.get(group=group).breaks


def test_a_codebase_the_store_lacks_means_no_evidence_with_the_reason_and_grading_goes_on(
        evidence_on, tmp_path, sandbox_python, sent):
    batch, group = import_group(tmp_path, sandbox_python, snapshot="nowhere.tar.gz")
    launch = grading_launch(batch=batch, grader="heuristic")
    assert evidence_process(group_id=group.pk) == NONE
    evidence = GroupEvidence.objects.get(group=group)
    # Shown to every role: the store is named by its setting; the worker's log has its path.
    assert evidence.reason == "task.snapshot 'nowhere.tar.gz' is not in the codebase store $GAGAR_CODEBASES"
    case = group_cases([group.pk])[group.pk]
    assert case.execution is None and case.no_execution == evidence.reason
    gradings_release(group_pks=[group.pk])
    assert gradings_process(grading_ids=list(launch.run.gradings.values_list("pk", flat=True))).done


def test_an_interpreter_the_sandbox_does_not_show_is_a_reason_not_a_run(evidence_on, tmp_path, sandbox_python, sent):
    evidence_on.GAGAR_SANDBOX_PATHS = []
    batch, group = import_group(tmp_path, sandbox_python)
    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == NONE
    reason = GroupEvidence.objects.get(group=group).reason
    assert reason.startswith(f"environment.python {sandbox_python} is not in a folder the sandbox shows")
    assert not EvidenceRun.objects.exists()


def test_without_a_codebase_store_nothing_is_queued_and_the_group_says_why(settings, tmp_path, sandbox_python, sent):
    settings.GAGAR_CODEBASES = ""
    batch, group = import_group(tmp_path, sandbox_python)
    grading_launch(batch=batch, grader="heuristic")
    assert not GroupEvidence.objects.exists()
    assert [kind for kind, *_ in sent] == ["grading"]
    assert group_cases([group.pk])[group.pk].no_execution == "no codebase store is configured (GAGAR_CODEBASES)"


def test_the_group_page_shows_the_matrix_and_a_cell_opens_its_log_and_command(
        evidence_on, tmp_path, sandbox_python, sent, client, researcher):
    batch, group = import_group(tmp_path, sandbox_python)
    evidence_launch(group_pks=[group.pk])
    evidence_process(group_id=group.pk)
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "Execution evidence: " in page and "1 breaks tests others pass" in page
    assert ('fails tests most other passing candidates pass: <span class="mono">existing: tests/test_ops.py::test_add'
            in page)
    key = next(run["key"] for run in GroupEvidence.objects.get(group=group).matrix["runs"]
               if run["suite"] == "existing" and run["candidates"] == ["breaks"])
    url = f"{reverse('evidence', args=[group.pk])}?run={key}"
    assert f'href="{url}#run">fail</a>' in page
    run = client.get(url).content.decode()
    assert "existing: fail" in run and "bwrap" in run and "assert 0 == 0.75" in run
    assert client.get(reverse("evidence", args=[group.pk]), {"run": "0" * 64}).status_code == 404


def test_a_group_without_evidence_says_why_on_its_page(settings, client, researcher, sample_batch):
    settings.GAGAR_CODEBASES = ""
    client.force_login(researcher)
    group = sample_batch.groups.first()
    said = "No execution evidence: no codebase store is configured (GAGAR_CODEBASES)"
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert f'<p class="muted small evidence-none" id="evidence">{said}</p>' in page  # a quiet line, not a card
    assert f"<summary>{said}</summary>" in client.get(reverse("evidence", args=[group.pk])).content.decode()


def test_the_batch_page_filters_the_groups_where_a_passing_candidate_breaks_tests(
        evidence_on, tmp_path, sandbox_python, sent, client, researcher):
    fine = {tid: spec for tid, spec in evidencedata.CANDIDATES.items() if tid in ("good", "also_good", "fails")}
    records = (evidencedata.records("calc-breaks", sandbox_python, tmp_path / "a")
               + evidencedata.records("calc-fine", sandbox_python, tmp_path / "b", candidates=fine))
    call_command("import_rollouts", str(write_jsonl(tmp_path / "two.jsonl", records)), batch="two", verbosity=0)
    batch = Batch.objects.get(name="two")
    pks = list(batch.groups.values_list("pk", flat=True))
    evidence_launch(group_pks=pks)
    assert [evidence_process(group_id=pk) for pk in pks] == [DONE, DONE]
    client.force_login(researcher)
    url = reverse("batch", args=[batch.pk])
    assert "calc-fine" in client.get(url).content.decode()
    page = client.get(url, {"evidence": "breaks"}).content.decode()
    assert "calc-breaks" in page and "calc-fine" not in page


def test_the_sweep_removes_what_killed_workers_left_in_the_work_root_and_nothing_in_use(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.GAGAR_EVIDENCE_TIME_LIMIT = settings.GAGAR_GRADING_TIME_LIMIT = 1
    root = workroot()
    left = root / "code-left"  # a grader's trees, a folder the candidate's code locked
    (left / "trees" / "t1" / "locked").mkdir(parents=True)
    (left / "trees" / "t1" / "locked").chmod(0o000)
    (root / "a-run-key").mkdir()  # a pass's run folder
    time.sleep(1.5)
    in_use = root / "code-in-use"
    in_use.mkdir()
    evidence_sweep()
    assert sorted(p.name for p in root.iterdir()) == ["code-in-use"]
