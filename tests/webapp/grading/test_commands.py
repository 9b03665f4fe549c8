"""`manage.py grade` and `manage.py sweep_gradings` (the --wait path runs with a real worker in tests/workers)."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from webapp.grading.selectors import run_takeover
from webapp.grading.services import grading_run_cancel
from webapp.models import Export, Grading, GradingRun

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)


def test_grade_queues_the_mixed_groups(sample_batch, capsys):
    call_command("grade", batch="sample", grader="heuristic")
    run = GradingRun.objects.get()
    mixed = sample_batch.groups.filter(label="mixed").count()
    assert run.gradings.count() == mixed
    assert f"run {run.pk}: {mixed} groups queued on 'cpu'" in capsys.readouterr().out


def test_grade_says_when_the_instance_gathers_no_execution_evidence(sample_batch, capsys, settings):
    settings.GAGAR_CODEBASES = ""
    call_command("grade", batch="sample", grader="heuristic")
    assert ("execution evidence is off on this instance (no GAGAR_CODEBASES in the environment or in "
            "GAGAR_DATA_DIR/instance.env): the groups are graded without running their code") in capsys.readouterr().out
    settings.GAGAR_CODEBASES = "/srv/store"
    call_command("grade", batch="sample", grader="heuristic", regrade=True)
    assert "execution evidence is off" not in capsys.readouterr().out


def test_grade_says_when_there_is_nothing_to_grade(sample_batch, capsys):
    call_command("grade", batch="sample")
    call_command("grade", batch="sample")
    assert "nothing to grade" in capsys.readouterr().out
    assert GradingRun.objects.count() == 1


def test_grade_wait_follows_the_run_already_grading_the_groups(sample_batch, capsys):
    call_command("grade", batch="sample")
    run = GradingRun.objects.get()
    with pytest.raises(CommandError, match="timed out"):  # nothing grades it here: following it waits
        call_command("grade", batch="sample", wait=True, timeout=0.3)
    out = capsys.readouterr().out
    assert f"run {run.pk} (heuristic) is already grading these groups (6 queued or running); following it" in out
    assert "queued 6, running 0" in out and GradingRun.objects.count() == 1


@pytest.mark.parametrize(("options", "message"), [
    ({"batch": "nope"}, "no batch named 'nope'"),
    ({"batch": "sample", "config": "{"}, "--config is not JSON"),
    ({"batch": "sample", "config": "[]"}, "--config must be a JSON object"),
    ({"batch": "sample", "grader": "unknown"}, "unknown grader 'unknown'"),
])
def test_grade_reports_bad_arguments(sample_batch, options, message):
    with pytest.raises(CommandError, match=message):
        call_command("grade", **options)


def test_sweep_gradings_reports_what_it_did(db, capsys):
    call_command("sweep_gradings", resend_after=60)
    assert capsys.readouterr().out.strip() == "0 re-queued, 0 failed, 0 sent\nexports: 0 re-queued, 0 failed, 0 sent"


def test_sweep_gradings_sends_an_export_whose_message_never_went_out(sample_batch, capsys):
    """A deployment that runs the sweep from cron, not beat, recovers exports too."""
    export = Export.objects.create(batch=sample_batch, kind="advantages", format="parquet", sent_at=None)
    call_command("sweep_gradings", resend_after=60)
    assert "exports: 0 re-queued, 0 failed, 1 sent" in capsys.readouterr().out
    export.refresh_from_db()
    assert export.sent_at is not None


@pytest.mark.django_db(transaction=True)  # the launch's messages go out on commit
def test_grade_wait_says_who_cancelled_the_run_and_exits_3(sample_batch, researcher, monkeypatch, capsys):
    def cancel_once_sent(work, grading_ids, queue, **options):  # a researcher cancels as soon as the run starts
        grading_run_cancel(run=Grading.objects.get(pk=grading_ids[0]).run, user=researcher)

    monkeypatch.setattr("webapp.work.enqueue", cancel_once_sent)
    with pytest.raises(CommandError) as error:
        call_command("grade", batch="sample", wait=True, timeout=10)
    run = GradingRun.objects.get()
    mixed = sample_batch.groups.filter(label="mixed").count()
    at = run.cancelled_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert str(error.value) == f"run {run.pk} was cancelled by rita at {at}: 0 of {mixed} groups graded"
    assert error.value.returncode == 3
    assert f"cancelled {mixed}" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)  # the launch's messages go out on commit
def test_grade_wait_says_which_final_rankings_the_run_replaced(sample_batch, monkeypatch, capsys):
    """A later grading becomes a group's final ranking whatever its grader: the command says so,
    so that grading the demo batch with another model does not change its export unnoticed."""
    from webapp.grading.worker import gradings_process

    # No broker: each launch's gradings are processed in this process as a worker would.
    monkeypatch.setattr("webapp.work.enqueue", lambda work, pks, queue, **kw: gradings_process(grading_ids=pks))
    mixed = sample_batch.groups.filter(label="mixed").count()
    call_command("grade", batch="sample", wait=True, timeout=30)
    first = GradingRun.objects.get()
    assert f"final rankings: run {first.pk} (heuristic) now ranks {mixed} groups of batch 'sample'\n" in (
        capsys.readouterr().out)
    other = "grading.graders.heuristic:HeuristicGrader"
    call_command("grade", batch="sample", grader=other, wait=True, timeout=30)
    second = GradingRun.objects.exclude(pk=first.pk).get()
    assert (f"final rankings: run {second.pk} ({other}) now ranks {mixed} groups of batch 'sample'; "
            f"it replaced the final ranking of {mixed} by heuristic") in capsys.readouterr().out
    # What the hybrid grader records of a group whose model answer it could not use.
    Grading.objects.filter(run=second).update(usage={"fallback": 1, "tokens_in": 10})
    assert run_takeover(second).fell_back == mixed
