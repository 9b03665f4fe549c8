"""The probes on the group page (issue 32): the statement's examples on the base code, the
reference fix and each candidate, a candidate that ends one otherwise than the reference shown
and not ranked by it; without a reference fix, no trace against it, and the page says so."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests import evidencedata
from tests.factories import write_jsonl
from webapp.evidence.services import evidence_launch, evidence_process
from webapp.grading.services import grading_launch, gradings_release
from webapp.grading.worker import gradings_process
from webapp.models import Batch, EvidenceProbe, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)

# Clamped as the reference clamps, with a docstring the example prints.
DOCUMENTED = evidencedata.FIXED.replace("def clamp(x, low, high):\n",
                                        'def clamp(x, low, high):\n    """x within <low, high>."""\n')
STATEMENT = """clamp does not clamp:

```python
from calc.ops import clamp
print(clamp(5, 0, 3))
print(clamp.__doc__)
```
"""


@pytest.fixture
def evidence_on(settings, tmp_path, sandbox_python, monkeypatch):
    settings.GAGAR_CODEBASES = str(evidencedata.store(tmp_path / "store"))
    settings.GAGAR_SANDBOX_PATHS = [str(sandbox_python.parents[2])]
    monkeypatch.setattr("webapp.work.enqueue", lambda *args, **kwargs: 1)  # no broker: this process works
    return settings


def gathered(tmp_path, sandbox_python, candidates, **options):
    records = evidencedata.records("calc-1", sandbox_python, tmp_path / "calc", candidates=candidates, **options)
    call_command("import_rollouts", str(write_jsonl(tmp_path / "calc.jsonl", records)), batch="calc", verbosity=0)
    batch = Batch.objects.get(name="calc")
    group = batch.groups.get()
    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == GroupEvidence.Status.DONE
    return batch, group


def test_a_candidate_that_ends_the_statements_example_otherwise_than_the_reference_is_shown_not_ranked_by_it(
        evidence_on, tmp_path, sandbox_python, client, researcher):
    candidates = {"documented": (True, {"calc/ops.py": DOCUMENTED}),
                  "also_good": evidencedata.CANDIDATES["also_good"], "fails": evidencedata.CANDIDATES["fails"]}
    batch, group = gathered(tmp_path, sandbox_python, candidates, statement=STATEMENT,
                            reference={"calc/ops.py": evidencedata.FIXED})
    assert EvidenceProbe.objects.count() == 4  # the reference, the base code, each candidate
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()

    examples = page.split('<table class="evidence-matrix evidence-examples">')[1].split("</table>")[0]
    assert ('<th class="mono">base code</th><th class="mono">reference fix</th><th class="mono">also_good</th>'
            '<th class="mono">documented</th>') in examples
    assert "print(clamp.__doc__)" in examples
    assert '<pre class="mono">5\nNone</pre>' in examples and '<pre class="mono">3\nNone</pre>' in examples
    assert ('<td class="state-disputed" title="ends otherwise than the reference fix"><pre class="mono">3\n'
            'x within &lt;low, high&gt;.</pre></td>') in examples
    assert ('documented</span> ends example 1 otherwise than the reference fix, which changes it') in page
    assert "diverge" not in page.split('id="evidence"')[1].split("</summary>")[0]  # every traced call alike
    assert "Trace against the reference fix" not in page

    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_release(group_pks=[group.pk])
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    grading = run.gradings.get()
    assert grading.tiers == [["documented"], ["also_good"]] and grading.flags == {}  # the leaner fix first
    assert ("ends the statement's example(s) 1 otherwise than the reference fix (not ranked by)"
            in grading.rationales["documented"])


def test_without_a_reference_fix_nothing_is_traced_and_the_group_page_says_the_trace_needs_one(
        evidence_on, tmp_path, sandbox_python, client, researcher):
    _, group = gathered(tmp_path, sandbox_python, {tid: evidencedata.CANDIDATES[tid] for tid in ("good", "fails")})
    assert not EvidenceProbe.objects.exists()
    assert GroupEvidence.objects.get(group=group).matrix["probes"] == {}
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert ("Trace against the reference fix: no reference fix: the trace against it needs one (the candidates "
            "are never traced against each other&#x27;s majority)") in page
