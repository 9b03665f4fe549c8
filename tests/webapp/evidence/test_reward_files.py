"""The test patch's whole files on the group page: the task's reference fix run as the control,
in a column of its own, and the passing candidate that fails the human fix's own test named;
without a reference fix, the page says which suites ran without one."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from grading.execution import REFERENCE
from tests import evidencedata
from tests.factories import write_jsonl
from webapp.evidence.services import evidence_launch, evidence_process
from webapp.grading.services import grading_launch, gradings_release
from webapp.grading.worker import gradings_process
from webapp.models import Batch, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def evidence_on(settings, tmp_path, sandbox_python, monkeypatch):
    settings.GAGAR_CODEBASES = str(evidencedata.store(tmp_path / "store"))
    settings.GAGAR_SANDBOX_PATHS = [str(sandbox_python.parents[2])]
    monkeypatch.setattr("webapp.work.enqueue", lambda *args, **kwargs: 1)  # no broker: this process works
    return settings


def gathered(tmp_path, sandbox_python, candidates, **options):
    """A group of `candidates` (evidencedata's ids) imported and its evidence gathered."""
    specs = {tid: evidencedata.CANDIDATES.get(tid) or (True, {"calc/ops.py": evidencedata.MISSES_INSIDE})
             for tid in candidates}
    records = evidencedata.records("calc-1", sandbox_python, tmp_path / "calc", candidates=specs, **options)
    call_command("import_rollouts", str(write_jsonl(tmp_path / "calc.jsonl", records)), batch="calc", verbosity=0)
    batch = Batch.objects.get(name="calc")
    group = batch.groups.get()
    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == GroupEvidence.Status.DONE
    return batch, group


def test_the_group_page_shows_the_reference_fix_column_and_the_candidate_that_fails_the_human_fixs_test(
        evidence_on, tmp_path, sandbox_python, client, researcher):
    batch, group = gathered(tmp_path, sandbox_python, ("good", "also_good", "misses_inside", "fails"),
                            reference={"calc/ops.py": evidencedata.FIXED})
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert ('<th class="ref" title="The task\'s own fix: the control, not ranked"><span class="badge ref">'
            'reference fix</span></th>') in page
    assert page.count('<td class="ref">') == 7  # the reference's cell on each row: 2 reward, 3 reward files, 2 existing
    assert "1 fails tests of the test patch's files" in page
    assert ("misses_inside</span> fails tests of the test patch's files that the reference fix passes: "
            f'<span class="mono">{evidencedata.INSIDE_TEST}</span>') in page
    assert "ran without a control" not in page
    key = next(run["key"] for run in GroupEvidence.objects.get(group=group).matrix["runs"]
               if run["suite"] == "reward_files" and REFERENCE in run["candidates"])
    run_page = client.get(reverse("evidence", args=[group.pk]), {"run": key}).content.decode()
    assert 'For <span class="mono">reference fix</span>, <span class="mono">good</span>' in run_page
    assert REFERENCE not in run_page

    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_release(group_pks=[group.pk])
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    grading = run.gradings.get()
    # Traced, its clamp(x=5, low=0, high=10) returns 10 where the reference fix's returns 5.
    assert grading.tiers[-1] == ["misses_inside"]
    assert grading.flags == {"misses_inside": ["diverges_from_reference", "fails_reward_files"]}
    assert evidencedata.INSIDE_TEST in grading.rationales["misses_inside"]


def test_a_task_without_a_reference_fix_says_on_the_group_page_which_suites_ran_without_a_control(
        evidence_on, tmp_path, sandbox_python, client, researcher):
    _, group = gathered(tmp_path, sandbox_python, ("good", "fails"))
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert ("no reference fix: the reward and reward_files suites ran without a control; reward files compared "
            "with the other passing candidates only") in page
    assert "badge ref" not in page.split('id="evidence"')[1]
