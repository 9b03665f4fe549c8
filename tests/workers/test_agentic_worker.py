"""The agentic grader end to end: a profile from the graders file, a real worker process,
the tiny random-weight model through the transformers backend. Its rankings are
nonsense; what is checked is that every group ends done or visibly failed, with the
grader's conversation, version and token usage recorded."""

import pytest
from django.core.management import call_command

from tests.factories import SAMPLE_ROLLOUTS
from tests.grading.agentic_fixtures import tiny_model  # noqa: F401  (session fixture)
from tests.workers.conftest import wait_until
from webapp.grading.services import grading_launch
from webapp.models import Batch, Grading, GradingTranscript

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def graders_file(tmp_path, tiny_model, monkeypatch):  # noqa: F811
    pytest.importorskip("xgrammar",
                        reason="the agentic grader needs the llm extra: make install-llm (make test has it)")
    path = tmp_path / "graders.toml"
    path.write_text(
        "[graders.tiny-cpu]\n"
        'backend = "transformers"\n'
        f'model = "{tiny_model}"\n'
        'queue = "cpu"\n'
        "[graders.tiny-cpu.budget]\n"
        "max_turns = 3\n"
        "rationale_chars = 40\n"
        "[graders.tiny-cpu.options]\n"
        'device = "cpu"\n'
        "threads = 1\n"
    )
    monkeypatch.setenv("GAGAR_GRADERS", str(path))
    return path


def test_a_worker_grades_the_sample_with_the_tiny_model(graders_file, filesystem_broker, workers):
    call_command("import_rollouts", str(SAMPLE_ROLLOUTS), batch="sample", verbosity=0)
    batch = Batch.objects.get(name="sample")
    workers(filesystem_broker, concurrency=1)  # the worker needs no graders file: the run holds the profile
    launch = grading_launch(batch=batch, grader="tiny-cpu")
    assert launch.run.queue == "cpu" and launch.run.config["backend"] == "transformers"

    def finished():
        return not launch.run.gradings.exclude(status__in=[Grading.Status.DONE, Grading.Status.FAILED]).exists()

    wait_until(finished, timeout=240, every=1, message="agentic grading did not finish")
    gradings = list(launch.run.gradings.all())
    assert len(gradings) == batch.groups.filter(label="mixed").count()
    for grading in gradings:
        if grading.status == Grading.Status.FAILED:
            assert grading.error.startswith(f"group {grading.group.group_id}: ")  # visible, never silent
        else:
            assert grading.tiers and set(grading.rationales) == {t for tier in grading.tiers for t in tier}
            assert grading.grader_version.startswith("tiny-model:p")  # model, prompt hash, sampling, budget
        assert grading.tokens > 0
    transcripts = GradingTranscript.objects.filter(grading__run=launch.run)
    assert transcripts.count() == len(gradings)
    assert any(m.get("role") == "assistant" for t in transcripts for m in t.messages)
