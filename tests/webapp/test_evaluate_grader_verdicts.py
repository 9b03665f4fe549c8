"""`manage.py evaluate_grader` measures against people's verdicts: lucky passes a person marked,
and an auditor's corrected ranking; similarity to the reference fix comes after, as a diagnostic."""

import io

import pytest
from django.core.management import call_command

from grading.evaluation import PROXY_LABEL, RANDOM, RANKINGS_LABEL, VERDICTS_LABEL
from tests.factories import group, write_jsonl
from webapp.annotation.services import ranking_save
from webapp.batches.services import batch_import
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.models import AuditItem, AuditSet, AuditVerdict

pytestmark = pytest.mark.django_db


def diff(path, removed, added):
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(removed)} +1,{len(added)} @@\n"
            + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added))


LUCKY = diff("m.py", ["x = 1"], ["x = 1  # fine"])  # the shortest: the heuristic's and shortest-first's pick
FIX = diff("m.py", ["x = 1"], ["x = 2"]) + diff("n.py", ["y = 1"], ["y = 2"])
LONGER = diff("m.py", ["x = 1"], ["x = 2", "w = 0"]) + diff("n.py", ["y = 1"], ["y = 2", "v = 0"])


@pytest.fixture
def reviewed(tmp_path, researcher):
    records = []
    for n in range(4):
        rows = group(f"g{n}", [1.0, 1.0, 1.0, 0.0])
        rows[0]["patch"], rows[1]["patch"], rows[2]["patch"] = LUCKY, FIX, LONGER
        rows[0]["task"]["reference_patch"] = FIX
        records += rows
    batch = batch_import(paths=[write_jsonl(tmp_path / "b.jsonl", records)], batch_name="verdicts").batch
    groups = {g.group_id: g for g in batch.groups.all()}
    for n in range(3):  # three groups a person ranked, marking the lucky pass t1 not passing
        ranking_save(group=groups[f"g{n}"], user=researcher, tiers=[["t2"], ["t3"]], flags={}, rationales={},
                     group_rationale="", based_on_version=0, grading_id=None,
                     verdicts={"t1": {"passed": False, "reason": "changes a comment only"}})
    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    audit = AuditSet.objects.create(name="a", batch=batch, size=1)
    item = AuditItem.objects.create(audit_set=audit, group=groups["g3"], position=1,
                                    grading=run.gradings.get(group=groups["g3"]))
    corrected = ranking_save(group=groups["g3"], user=researcher, tiers=[["t3"], ["t1", "t2"]], flags={},
                             rationales={}, group_rationale="", based_on_version=0, grading_id=None)
    AuditVerdict.objects.create(item=item, auditor=researcher, verdict="wrong", corrected_version=corrected.version)
    return batch


def evaluate_grader(**options) -> str:
    out = io.StringIO()
    call_command("evaluate_grader", stdout=out, **options)
    return out.getvalue()


def rows(out: str, label: str) -> dict[str, str]:
    """The table under `label`, by ranking name."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(label))
    table = {}
    for line in lines[start + 2:]:
        if not line.startswith(("heuristic", "shortest", "random")):
            break
        table[line.split("  ")[0]] = line
    return table


def test_people_s_verdicts_come_first_and_the_proxy_is_a_labelled_diagnostic(reviewed):
    out = evaluate_grader(batch="verdicts")
    assert out.index(VERDICTS_LABEL) < out.index(RANKINGS_LABEL) < out.index("Diagnostic, not a target") \
        < out.index(PROXY_LABEL)
    assert f"{VERDICTS_LABEL}; 3 groups" in out and f"{RANKINGS_LABEL}; 1 group" in out
    verdicts = rows(out, VERDICTS_LABEL)
    heuristic = next(line for name, line in verdicts.items() if name.startswith("heuristic ("))
    # The lucky pass changes a comment only: the heuristic ranks it last (no effect), shortest-first first.
    assert heuristic.split()[-6:] == ["1.00", "[1.00,", "1.00]", "0.00", "[0.00,", "0.00]"]
    assert verdicts["shortest patch first"].split()[-6:] == ["0.00", "[0.00,", "0.00]", "1.00", "[1.00,", "1.00]"]
    assert RANDOM in verdicts
    corrected = rows(out, RANKINGS_LABEL)
    assert corrected["shortest patch first"].split()[-3:] == ["0.00", "[0.00,", "0.00]"]  # t1 is not t3
