"""Grading services called in this process, as a worker would call them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.workers.conftest import SCRIPTED, make_batch
from webapp.evidence.services import evidence_sweep
from webapp.grading.selectors import batch_grading_status
from webapp.grading.services import LaunchError, grading_launch, gradings_retry_failed, gradings_sweep
from webapp.grading.worker import gradings_process
from webapp.models import Grading, GradingRun, Group, GroupEvidence
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (Grading.Status.QUEUED, Grading.Status.RUNNING, Grading.Status.DONE,
                                            Grading.Status.FAILED, Grading.Status.CANCELLED)


@pytest.fixture
def sent(monkeypatch):
    """The messages services send: (grading ids, queue, countdown), instead of a broker."""
    messages = []

    def enqueue(work, ids, queue, *, countdown=None):
        messages.append((list(ids), queue, countdown))
        return 1

    monkeypatch.setattr("webapp.work.enqueue", enqueue)
    return messages


def launch(batch, grader="heuristic", config=None, **kwargs):
    return grading_launch(batch=batch, grader=grader, config=config or {}, **kwargs)


def process_all(run):
    return gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))


def test_launch_queues_one_grading_per_mixed_group_and_sends_them_after_commit(
        tmp_path, sent, researcher, django_capture_on_commit_callbacks):
    batch = make_batch(tmp_path, "b", 3)
    with django_capture_on_commit_callbacks(execute=True):
        result = launch(batch, user=researcher)
    run = result.run
    assert (result.queued, result.skipped, run.queue, run.created_by) == (3, 0, "cpu", researcher)
    assert set(run.gradings.values_list("group__group_id", flat=True)) == {"b-0000", "b-0001", "b-0002"}
    assert set(run.gradings.values_list("status", "attempts")) == {(QUEUED, 0)}
    assert sent == [(sorted(run.gradings.values_list("pk", flat=True)), "cpu", None)]


def test_launch_sends_nothing_before_the_transaction_commits(tmp_path, sent):
    launch(make_batch(tmp_path, "b", 2))
    assert sent == []  # this test's transaction never commits


def test_launch_skips_groups_already_graded_unless_asked_to_regrade(tmp_path, sent):
    batch = make_batch(tmp_path, "b", 2)
    process_all(launch(batch).run)
    again = launch(batch)
    assert (again.run, again.queued, again.skipped) == (None, 0, 2)
    assert launch(batch, regrade=True).queued == 2


def test_launch_skips_groups_with_grading_in_progress_even_when_regrading(tmp_path, sent):
    batch = make_batch(tmp_path, "b", 2)
    launch(batch)
    assert launch(batch, regrade=True).queued == 0


def test_launch_refuses_an_unknown_grader(tmp_path):
    with pytest.raises(LaunchError, match="unknown grader 'nope'"):
        launch(make_batch(tmp_path, "b", 1), grader="nope")
    assert not GradingRun.objects.exists()


def test_processing_grades_and_records_the_result(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 2)).run
    result = process_all(run)
    assert len(result.done) == 2 and result.failed == result.retrying == result.lost == []
    grading = run.gradings.first()
    assert (grading.status, grading.attempts, grading.error) == (DONE, 1, "")
    assert grading.grader_version.startswith("heuristic-1-")
    assert grading.tiers == [["t1", "t2"]]  # identical patches tie
    assert set(grading.rationales) == {"t1", "t2"}
    assert grading.duration_s > 0 and grading.finished_at and grading.claimed_at
    run.refresh_from_db()
    assert run.grader_version == grading.grader_version


def test_a_second_delivery_of_the_same_task_claims_nothing(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 2)).run
    process_all(run)
    before = list(run.gradings.values())
    assert process_all(run).claimed == []
    assert list(run.gradings.values()) == before


def test_a_result_is_not_written_when_the_claim_moved_on(tmp_path, sent, monkeypatch):
    run = launch(make_batch(tmp_path, "b", 1)).run
    grading = run.gradings.get()

    def slow_grader_swept_meanwhile(grader, views):
        # While this worker grades, the sweep hands the grading to another one.
        Grading.objects.filter(pk=grading.pk).update(status=QUEUED, claim_token="")
        return grader.rank_many(views)

    monkeypatch.setattr("webapp.grading.worker._rank", slow_grader_swept_meanwhile)
    result = process_all(run)
    assert result.lost == [grading.pk] and result.done == []
    grading.refresh_from_db()
    assert (grading.status, grading.tiers) == (QUEUED, None)


def test_a_permanent_error_fails_the_group_without_retry(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 3), grader=SCRIPTED, config={"fail_on": "b-0001"}).run
    result = process_all(run)
    assert (len(result.done), len(result.failed)) == (2, 1)
    failed = run.gradings.get(status=FAILED)
    assert failed.group.group_id == "b-0001" and "cannot grade b-0001" in failed.error
    assert sent == []


def test_a_transient_error_is_retried_with_backoff_until_attempts_run_out(
        tmp_path, sent, settings, django_capture_on_commit_callbacks):
    settings.GAGAR_GRADING_MAX_ATTEMPTS = 2
    run = launch(make_batch(tmp_path, "b", 1), grader=SCRIPTED, config={"transient_on": "b-"}).run
    grading = run.gradings.get()
    with django_capture_on_commit_callbacks(execute=True):
        assert process_all(run).retrying == [grading.pk]
    grading.refresh_from_db()
    assert (grading.status, grading.attempts) == (QUEUED, 1)
    assert grading.error == "attempt 1 failed: backend busy for b-0000; queued again"
    assert sent[-1][:2] == ([grading.pk], "gpu") and 2.5 <= sent[-1][2] <= 5

    with django_capture_on_commit_callbacks(execute=True):
        assert process_all(run).failed == [grading.pk]
    grading.refresh_from_db()
    assert (grading.status, grading.attempts) == (FAILED, 2)
    assert grading.error == "gave up after 2 attempts: the last one failed: backend busy for b-0000"


def test_a_grader_bug_on_one_group_fails_only_that_group(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 3), grader=SCRIPTED, config={"crash_on": "b-0002"}).run
    process_all(run)
    assert dict(run.gradings.values_list("group__group_id", "status")) == {
        "b-0000": DONE, "b-0001": DONE, "b-0002": FAILED}
    assert run.gradings.get(status=FAILED).error == "ValueError: grader bug on b-0002"


def test_an_invalid_ranking_fails_the_group(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 1), grader=SCRIPTED, config={"invalid_on": "b-"}).run
    process_all(run)
    grading = run.gradings.get()
    assert grading.status == FAILED
    assert grading.error.startswith("invalid ranking from scripted: ")


def test_a_grader_that_cannot_load_fails_every_group_of_its_run(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 2), grader="tests.workers.graders:Missing").run
    process_all(run)
    assert set(run.gradings.values_list("status", flat=True)) == {FAILED}
    assert "cannot load grader" in run.gradings.first().error


def test_the_sweep_requeues_expired_leases_fails_those_out_of_attempts_and_sends_unsent_ones(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 4)).run
    expired, spent, alive, unsent = run.gradings.order_by("pk")
    now = timezone.now()
    Grading.objects.filter(pk=expired.pk).update(status=RUNNING, attempts=1, claim_token="x",
                                                 lease_expires_at=now - timedelta(seconds=1))
    Grading.objects.filter(pk=spent.pk).update(status=RUNNING, attempts=3, claim_token="y",
                                               lease_expires_at=now - timedelta(seconds=1))
    Grading.objects.filter(pk=alive.pk).update(status=RUNNING, attempts=1, claim_token="z",
                                               lease_expires_at=now + timedelta(seconds=30))
    assert unsent.sent_at is None  # this test's transaction never committed the launch

    sweep = gradings_sweep(resend_after=3600)
    assert (sweep.requeued, sweep.failed, sweep.sent, sweep.broker_error) == (1, 1, 2, "")
    expired.refresh_from_db(), spent.refresh_from_db(), alive.refresh_from_db(), unsent.refresh_from_db()
    assert (expired.status, expired.claim_token) == (QUEUED, "")
    assert expired.error == "attempt 1 lost its worker; queued again"
    assert spent.status == FAILED and spent.error == "gave up after 3 attempts: the last one lost its worker"
    assert (alive.status, alive.claim_token) == (RUNNING, "z")
    assert expired.sent_at and unsent.sent_at
    assert sorted(pk for ids, _, _ in sent for pk in ids) == sorted([expired.pk, unsent.pk])
    assert gradings_sweep(resend_after=3600) == type(sweep)(0, 0, 0)


def test_the_sweep_resends_gradings_queued_longer_than_resend_after(tmp_path, sent):
    run = launch(make_batch(tmp_path, "b", 2)).run
    stale, fresh = run.gradings.order_by("pk")
    now = timezone.now()
    Grading.objects.filter(pk=stale.pk).update(sent_at=now - timedelta(hours=2))
    Grading.objects.filter(pk=fresh.pk).update(sent_at=now)
    assert gradings_sweep(resend_after=3600).sent == 1
    assert sent[-1][0] == [stale.pk]


def test_a_grading_waits_for_its_groups_evidence_pass_and_goes_once_the_sweep_gives_the_pass_up(
        tmp_path, sent, settings, django_capture_on_commit_callbacks):
    batch = make_batch(tmp_path, "b", 2)
    gathered, plain = batch.groups.filter(label=Group.Label.MIXED).order_by("pk")
    lost = timezone.now() - timedelta(seconds=1)  # its pass's worker died on its last attempt
    GroupEvidence.objects.create(group=gathered, status=GroupEvidence.Status.RUNNING, queued_at=lost, claim_token="x",
                                 attempts=settings.GAGAR_EVIDENCE_MAX_ATTEMPTS, lease_expires_at=lost)
    with django_capture_on_commit_callbacks(execute=True):
        run = launch(batch).run
    waits, free = run.gradings.get(group=gathered), run.gradings.get(group=plain)
    assert sent == [([free.pk], "cpu", None)]  # not sent while its group's pass runs
    assert gradings_process(grading_ids=[waits.pk, free.pk]).claimed == [free.pk]  # nor claimed
    assert gradings_sweep(resend_after=0).sent == 0  # nor swept
    waits.refresh_from_db()
    assert (waits.status, waits.sent_at, waits.attempts) == (QUEUED, None, 0)

    assert evidence_sweep().failed == 1
    assert gradings_sweep().sent == 1 and sent[-1][0] == [waits.pk]
    assert gradings_process(grading_ids=[waits.pk]).done == [waits.pk]  # graded without the evidence


def test_retrying_failed_gradings_queues_them_with_fresh_attempts(
        tmp_path, sent, django_capture_on_commit_callbacks):
    batch = make_batch(tmp_path, "b", 2)
    run = launch(batch, grader=SCRIPTED, config={"fail_on": "b-0001"}).run
    process_all(run)
    with django_capture_on_commit_callbacks(execute=True):
        assert gradings_retry_failed(batch=batch).queued == 1
    grading = run.gradings.get(group__group_id="b-0001")
    assert (grading.status, grading.error, grading.attempt_limit) == (QUEUED, "", 1 + 3)
    assert grading.sent_at is not None
    assert sent == [([grading.pk], "gpu", None)]
    assert gradings_retry_failed(batch=batch).queued == 0


def test_status_counts_per_run_newest_first_with_failures(tmp_path, sent):
    batch = make_batch(tmp_path, "b", 3)
    first = launch(batch, grader=SCRIPTED, config={"fail_on": "b-0000"}).run
    process_all(first)
    second = launch(batch, regrade=True).run
    [newest, older] = batch_grading_status(batch, viewer=UNRESTRICTED)
    assert (newest.run, older.run) == (second, first)
    assert newest.counts == {QUEUED: 3, RUNNING: 0, DONE: 0, FAILED: 0, CANCELLED: 0} and newest.active
    assert older.counts == {QUEUED: 0, RUNNING: 0, DONE: 2, FAILED: 1, CANCELLED: 0} and not older.active
    assert [f["group__group_id"] for f in older.failures] == ["b-0000"]


def test_a_launch_chooses_its_queue_in_one_place(settings):
    from webapp.grading.services import grader_profile

    settings.GAGAR_GRADER_QUEUES = {SCRIPTED: "cpu"}
    assert grader_profile("heuristic").queue == "cpu"  # the profile's own
    assert grader_profile(SCRIPTED).queue == "cpu"  # GAGAR_GRADER_QUEUES
    assert grader_profile("tests.workers.graders:Other").queue == "gpu"  # not listed
    assert grader_profile("heuristic", queue="gpu").queue == "gpu"  # the command line's --queue
    with pytest.raises(LaunchError, match="unknown queue 'fast'"):
        grader_profile("heuristic", queue="fast")
