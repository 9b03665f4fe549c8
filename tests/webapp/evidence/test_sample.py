"""The sample's evidence groups (sample/evidence.jsonl) through the evidence pass and the heuristic:
the passing candidate that breaks what the reward misses, the patch with no effect and the flaky
reward are each caught, named, and ranked last; no correct candidate is flagged."""


import pytest
from django.core.management import call_command

from grading.execution import Matrix, fails_reward_files
from tests import evidencedata
from webapp.evidence.services import evidence_launch, evidence_process
from webapp.grading.services import grading_launch, gradings_release
from webapp.grading.worker import gradings_process
from webapp.models import Batch, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)



@pytest.fixture
def graded(settings, tmp_path, sandbox_python, monkeypatch):
    settings.GAGAR_CODEBASES = str(evidencedata.SAMPLE)
    settings.GAGAR_SANDBOX_PATHS = [str(sandbox_python.parents[2])]
    monkeypatch.setattr("webapp.work.enqueue", lambda *args, **kwargs: 1)  # no broker: this process works
    path = evidencedata.sample_evidence(sandbox_python, tmp_path / "evidence.jsonl")
    call_command("import_rollouts", str(path), batch="evidence", verbosity=0)
    batch = Batch.objects.get(name="evidence")
    run = grading_launch(batch=batch, grader="heuristic").run
    pks = list(batch.groups.values_list("pk", flat=True))
    for pk in pks:
        assert evidence_process(group_id=pk) == GroupEvidence.Status.DONE
    gradings_release(group_pks=pks)
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    return {g.group.group_id: g for g in run.gradings.select_related("group")}


def evidence(group_id):
    return GroupEvidence.objects.get(group__group_id=group_id)


def test_each_planted_lucky_pass_is_caught_named_and_ranked_last_and_no_correct_fix_is_flagged(graded):
    # A passing fix that breaks parsing: the codebase's tests of parsing.py and r2's test catch it.
    caught = evidence("invoicekit-101").breaks
    assert set(caught) == {"r3"}
    assert ["existing", "tests/test_parsing.py::test_parse_amount[EUR 12.50-expected3]"] in caught["r3"]
    assert ["peer:r2", "tests/test_parsing.py::test_parse_amount_with_code_and_separators"] in caught["r3"]
    grading = graded["invoicekit-101"]
    # The test patch's file, run whole, holds that test too: the reference fix passes it, r3 does not;
    # and traced, r3's parse_amount returns otherwise than the reference fix's on those calls.
    assert grading.tiers[-1] == ["r3"]
    assert grading.flags["r3"] == ["breaks_tests", "diverges_from_reference", "fails_reward_files"]
    assert "EUR 12.50" in grading.rationales["r3"]
    assert fails_reward_files(Matrix.from_dict(evidence("invoicekit-101").matrix)) == {
        "r3": ["tests/test_parsing.py::test_parse_amount[12.50 GBP-expected4]",
               "tests/test_parsing.py::test_parse_amount[EUR 12.50-expected3]"]}

    # A patch with no effect, passed by a flaky evaluation: its reward tests fail when run again.
    assert evidence("invoicekit-102").flaky == {
        "r3": "the reward passed it; its reward tests fail here: tests/test_money.py::test_abs"}
    grading = graded["invoicekit-102"]
    assert grading.tiers[-1] == ["r3"] and set(grading.flags["r3"]) == {"no_effect", "other"}
    assert "not reproduced" in grading.rationales["r3"]

    # A flaky reward failed r2, the same change as r1: run again, it passes.
    assert evidence("invoicekit-103").flaky == {"r2": "the reward failed it; its reward tests pass here"}
    assert not evidence("invoicekit-103").breaks_tests

    flagged = {group_id: set(grading.flags) for group_id, grading in graded.items()}
    assert flagged == {"invoicekit-101": {"r3"}, "invoicekit-102": {"r3"}, "invoicekit-103": set()}
    assert evidence_launch(group_pks=list(GroupEvidence.objects.values_list("pk", flat=True))).broker_error == ""
    assert set(GroupEvidence.objects.values_list("status", flat=True)) == {GroupEvidence.Status.DONE}
