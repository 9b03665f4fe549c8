"""The agentic grader reads and runs the candidates' code through a real worker: the evidence
pass gathers the calc group's matrix, then the grading worker hands the grader that group's
codebase, environment, sandbox and reference fix, and a scripted model (tests/workers/backends.py)
calls run_tests on the passing candidates, run_all on them and the reference fix, and view_file on
one. A group without evidence is graded with the code tools unavailable, saying why."""

from pathlib import Path

import pytest
from django.conf import settings

from tests import evidencedata
from tests.factories import group as plain_group
from tests.grading.agentic_fixtures import tiny_model  # noqa: F401  (session fixture)
from tests.workers.conftest import import_batch, wait_until
from webapp.grading.services import grading_launch
from webapp.models import Grading, GradingTranscript

pytestmark = pytest.mark.django_db(transaction=True)

CANDIDATE_CODE = {tid: files["calc/ops.py"] for tid, (_, files) in evidencedata.CANDIDATES.items()}


@pytest.fixture
def graders_file(tmp_path, monkeypatch):
    path = tmp_path / "graders.toml"
    path.write_text('[graders.code]\nbackend = "tests.workers.backends:CodeCalling"\nqueue = "cpu"\n')
    monkeypatch.setenv("GAGAR_GRADERS", str(path))
    return path


@pytest.fixture
def tiny_graders_file(tmp_path, tiny_model, monkeypatch):  # noqa: F811
    pytest.importorskip("xgrammar",
                        reason="the agentic grader needs the llm extra: make install-llm (make test has it)")
    path = tmp_path / "graders.toml"
    path.write_text(f'[graders.tiny-code]\nbackend = "transformers"\nmodel = "{tiny_model}"\nqueue = "cpu"\n'
                    '[graders.tiny-code.budget]\nmax_turns = 4\nrationale_chars = 40\n'
                    '[graders.tiny-code.options]\ndevice = "cpu"\nthreads = 1\n')
    monkeypatch.setenv("GAGAR_GRADERS", str(path))
    return path


def transcript(launch, group_id: str) -> list[dict]:
    grading = launch.run.gradings.get(group__group_id=group_id)
    assert grading.status == Grading.Status.DONE, grading.error
    return GradingTranscript.objects.get(grading=grading).messages


def test_a_worker_gives_the_agentic_grader_each_candidates_code(tmp_path, sandbox_python, evidence_env,
                                                                 graders_file, workers):
    records = (evidencedata.records("calc-1", sandbox_python, tmp_path / "calc",
                                    reference={"calc/ops.py": evidencedata.FIXED})
               + plain_group("plain-1", [1, 1, 0]))
    batch = import_batch(tmp_path, sandbox_python, "calc", records)
    workers(evidence_env)
    launch = grading_launch(batch=batch, grader="code")
    wait_until(lambda: not launch.run.gradings.exclude(status__in=[Grading.Status.DONE, Grading.Status.FAILED])
               .exists(), timeout=180, message=str(list(launch.run.gradings.values_list("status", "error"))))

    messages = transcript(launch, "calc-1")
    ids = next(m["labels"] for m in messages if m.get("event") == "start")
    first_turn = next(m["content"] for m in messages if m.get("role") == "user")
    assert "they may run code 5 time(s), 60 s in all." in first_turn
    outputs = [m for m in messages if m.get("role") == "tool"]
    assert [m["tool"] for m in outputs] == ["run_tests"] * 4 + ["run_all", "view_file"]
    for output in outputs[:4]:
        label = output["content"].split(":", 1)[0]
        if ids[label] == "breaks":
            assert "  fail tests/test_ops.py::test_add" in output["content"]
        else:
            assert "tests: 2 pass" in output["content"], output["content"]
    label = outputs[5]["content"].split("=== ", 1)[1].split(":", 1)[0]
    shown = [line[6:] for line in outputs[5]["content"].splitlines() if line[:5].strip().isdigit()]
    assert shown == CANDIDATE_CODE[ids[label]].splitlines()
    checked = outputs[4]["content"].splitlines()
    assert "6 run(s) in 2 distinct outcome(s)" in checked[0] and "[code budget left: 0 run(s)" in checked[1]
    clamps = ("good", "good_copy", "also_good", "breaks")  # breaks is wrong about add, not clamp
    like_reference = sorted(label for label, tid in ids.items() if tid in clamps)
    assert checked[2].startswith(", ".join(["reference", *like_reference]) + ": passed in ")
    assert checked[3:5] == ["  output:", "0 5"]
    trees = Path(settings.DATA_DIR) / "evidence" / "runs"
    # The trees go once the grades are written: just after the gradings read done.
    wait_until(lambda: not list(trees.glob("code-*")), timeout=30, message="the candidates' trees stayed")

    plain = transcript(launch, "plain-1")
    assert not any(m.get("role") == "tool" for m in plain)
    assert ("Code: view_file, run_tests, run and run_all are unavailable for this group: no mirror of o/r in the "
            "codebase store $GAGAR_CODEBASES.") in next(m["content"] for m in plain if m.get("role") == "user")


@pytest.mark.slow
def test_the_tiny_model_grades_a_group_with_code_through_a_worker(tmp_path, sandbox_python, evidence_env,
                                                                  tiny_graders_file, workers):
    """A random model's choices are nonsense; what it is offered and what its tool calls answer
    are real: the code tools, run in the sandbox, answering results or reasons."""
    batch = import_batch(tmp_path, sandbox_python, "calc", evidencedata.records("calc-1", sandbox_python,
                                                                                 tmp_path / "calc"))
    workers(evidence_env, concurrency=1)
    launch = grading_launch(batch=batch, grader="tiny-code")
    wait_until(lambda: not launch.run.gradings.exclude(status__in=[Grading.Status.DONE, Grading.Status.FAILED])
               .exists(), timeout=240, every=1, message="the tiny model's grading did not finish")
    grading = launch.run.gradings.get()
    if grading.status == Grading.Status.FAILED:
        assert grading.error.startswith("group calc-1: ")  # visible, never silent
    messages = GradingTranscript.objects.get(grading=grading).messages
    first_turn = next(m["content"] for m in messages if m.get("role") == "user")
    assert "they may run code 5 time(s), 60 s in all." in first_turn
    labels = next(m["labels"] for m in messages if m.get("event") == "start")
    for output in (m for m in messages if m.get("tool") in ("view_file", "run_tests", "run")):
        assert output["content"].startswith((*labels, "=== ", "error: ")), output["content"][:200]
