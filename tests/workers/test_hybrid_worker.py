"""The hybrid grader end to end: a profile from the graders file, a real worker process,
the tiny random-weight model through the transformers backend. The model's rankings are
nonsense; the hybrid grader turns every one into a grade, reconciled with the heuristic's
prior or, where the model failed, the heuristic's own, so every grading ends done."""

import pytest
from django.core.management import call_command

from grading.rankings import validate_ranking
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
        "[graders.tiny-hybrid]\n"
        'grader = "hybrid"\n'
        'backend = "transformers"\n'
        f'model = "{tiny_model}"\n'
        'queue = "cpu"\n'
        "[graders.tiny-hybrid.budget]\n"
        "max_turns = 3\n"
        "rationale_chars = 40\n"
        "[graders.tiny-hybrid.options]\n"
        'device = "cpu"\n'
        "threads = 1\n"
    )
    monkeypatch.setenv("GAGAR_GRADERS", str(path))
    return path


def test_a_worker_grades_the_sample_with_the_hybrid_profile(graders_file, filesystem_broker, workers):
    call_command("import_rollouts", str(SAMPLE_ROLLOUTS), batch="sample", verbosity=0)
    batch = Batch.objects.get(name="sample")
    workers(filesystem_broker, concurrency=1)
    launch = grading_launch(batch=batch, grader="tiny-hybrid")
    assert launch.run.config["grader"] == "hybrid" and launch.run.queue == "cpu"

    def finished():
        return not launch.run.gradings.exclude(status__in=[Grading.Status.DONE, Grading.Status.FAILED]).exists()

    wait_until(finished, timeout=240, every=1, message="hybrid grading did not finish")
    gradings = list(launch.run.gradings.select_related("group"))
    assert len(gradings) == batch.groups.filter(label="mixed").count() > 0
    for grading in gradings:
        assert grading.status == Grading.Status.DONE, grading.error
        passing = list(grading.group.trajectories.filter(passed=True).values_list("trajectory_id", flat=True))
        validate_ranking(grading.tiers, passing, grading.flags)
        assert set(grading.rationales) == set(passing)
        assert grading.grader_version.startswith("hybrid-")
        assert 0 <= grading.confidence <= 1 and grading.tokens > 0
    transcripts = GradingTranscript.objects.filter(grading__run=launch.run)
    assert transcripts.count() == len(gradings)
    events = [m.get("event") for t in transcripts for m in t.messages]
    assert "prior" in events or "fallback" in events
