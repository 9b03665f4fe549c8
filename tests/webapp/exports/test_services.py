"""Launching and building exports in this process: validation, one export for identical
launches, the files and manifest, failures that leave nothing behind, and the sweep."""

import hashlib
import json
from datetime import timedelta
from importlib.metadata import version

import pyarrow.parquet as pq
import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from webapp.advantages.config import parse_advantage_config
from webapp.exports import services
from webapp.exports.advantages import COLUMNS
from webapp.exports.selectors import export_file, exports_root
from webapp.exports.services import ExportError, export_build, export_launch, exports_sweep
from webapp.models import Export

pytestmark = pytest.mark.django_db


def launch(batch, user, format="parquet", config=None, kind="advantages"):
    return export_launch(batch=batch, kind=kind, format=format, config=config or {}, user=user)


@pytest.mark.parametrize(("kind", "format", "config", "message"), [
    ("dpo", "parquet", {}, "kind: must be one of advantages, sft, not 'dpo'"),
    ("advantages", "csv", {}, "format: must be one of parquet, jsonl, not 'csv'"),
    ("advantages", "jsonl", {"schedule": "nope"}, "config: unknown schedule 'nope'"),
    ("advantages", "jsonl", {"params": {"w_min": 3}}, "config: schedule 'linear': w_min must be in"),
    ("advantages", "jsonl", {"colour": "red"}, "config: unknown config fields ['colour']"),
    ("sft", "parquet", {}, "format: the grader SFT export is jsonl, not 'parquet'"),
])
def test_a_bad_launch_says_which_field_is_wrong_and_creates_nothing(sample_batch, researcher, kind, format, config,
                                                                    message):
    with pytest.raises(ExportError) as error:
        launch(sample_batch, researcher, format, config, kind)
    assert str(error.value).startswith(message)
    assert not Export.objects.exists()


@pytest.mark.parametrize("role", ["annotator", "auditor", "outsider"])
def test_only_researchers_may_launch_an_export(sample_batch, request, role):
    with pytest.raises(PermissionDenied, match="exports are for researchers"):
        launch(sample_batch, request.getfixturevalue(role))
    assert not Export.objects.exists()


def test_an_export_keeps_the_whole_config_it_is_made_with(sample_batch, researcher):
    plain = launch(sample_batch, researcher)
    assert plain.config == parse_advantage_config(sample_batch.advantage_config).as_dict()
    tuned = launch(sample_batch, researcher, config={"params": {"w_min": 0.5}, "w_flag": 0.1})
    assert tuned.config["params"] == {"w_min": 0.5} and tuned.config["schedule"] == "linear"
    assert (tuned.config["w_flag"], tuned.config["norm_by_std"]) == (0.1, True)


def test_a_second_identical_launch_returns_the_export_already_queued(sample_batch, researcher):
    first = launch(sample_batch, researcher)
    assert launch(sample_batch, researcher).pk == first.pk
    assert launch(sample_batch, researcher, config={"params": {"w_min": 0.2}}).pk == first.pk  # the default
    assert launch(sample_batch, researcher, format="jsonl").pk != first.pk
    assert launch(sample_batch, researcher, config={"params": {"w_min": 0.4}}).pk != first.pk
    export_build(first.pk)
    assert launch(sample_batch, researcher).pk != first.pk  # the first is done: a new one


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_build_writes_the_data_file_and_its_manifest_in_the_exports_folder(sample_batch, researcher):
    export = launch(sample_batch, researcher)
    export_build(export.pk)
    export.refresh_from_db()
    assert (export.status, export.error, export.attempts) == ("done", "", 1)
    assert export.rows_done == export.rows_total == sample_batch.n_trajectories == 45
    folder = exports_root() / str(export.pk)
    assert export.folder == str(export.pk) and sorted(p.name for p in folder.iterdir()) == [
        "advantages.parquet", "manifest.json"]
    assert [f["name"] for f in export.files] == ["advantages.parquet", "manifest.json"]
    for described in export.files:
        path = export_file(export, described["name"])
        assert (described["bytes"], described["sha256"]) == (path.stat().st_size, sha256(path))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["files"] == export.files[:1]
    assert (manifest["export_id"], manifest["kind"], manifest["batch"], manifest["format"]) == (
        export.pk, "advantages", "sample", "parquet")
    assert manifest["config"] == export.config and manifest["rows"] == 45
    assert [c["name"] for c in manifest["columns"]] == list(COLUMNS)
    assert manifest["counts"]["label"] == {"mixed": 36, "all_pass": 4, "all_fail": 4, "singleton": 1}
    assert manifest["counts"]["source"] == {"human": 0, "grader": 0, "fallback": 0, "none": 45}
    assert (manifest["created_by"], manifest["app_version"]) == ("rita", version("gagar-studio"))
    assert manifest["writer"].startswith("parquet-cpp-arrow version ")
    assert pq.read_table(folder / "advantages.parquet").num_rows == 45
    assert timezone.datetime.fromisoformat(manifest["created_at"]) >= export.created_at


def test_a_second_delivery_of_a_finished_export_changes_nothing(sample_batch, researcher):
    export = launch(sample_batch, researcher)
    export_build(export.pk)
    before = Export.objects.get(pk=export.pk)
    export_build(export.pk)
    after = Export.objects.get(pk=export.pk)
    assert (after.status, after.finished_at, after.claim_token, after.attempts) == (
        "done", before.finished_at, before.claim_token, 1)


def test_a_build_that_breaks_midway_fails_with_its_reason_and_leaves_no_file(sample_batch, researcher):
    export = launch(sample_batch, researcher)
    # A config no launch would accept, as if the schedule had been removed since: the data
    # file is open when the first chunk's advantages fail.
    Export.objects.filter(pk=export.pk).update(config={**export.config, "schedule": "retired"})
    export_build(export.pk)
    export.refresh_from_db()
    assert export.status == "failed" and export.error.startswith("ValueError: unknown schedule 'retired'")
    assert export.finished_at is not None and export.files == []
    assert list(exports_root().iterdir()) == []
    with pytest.raises(LookupError, match="is failed, not done"):
        export_file(export, "advantages.parquet")


def test_a_build_that_cannot_make_its_folder_fails_with_the_reason(sample_batch, researcher, data_dir):
    (data_dir / "exports").write_text("a file where the exports folder should be")
    export = launch(sample_batch, researcher)
    export_build(export.pk)
    export.refresh_from_db()
    assert export.status == "failed" and "Not a directory" in export.error


def lost_worker(export, *, attempts=1, lease_left=-1.0):
    """The row as a worker that died mid-build leaves it (its lease ran out `-lease_left`
    seconds ago), with its half-built folder."""
    token = "dead" * 8
    now = timezone.now()
    Export.objects.filter(pk=export.pk).update(status="running", claim_token=token, attempts=attempts,
                                               claimed_at=now - timedelta(minutes=5),
                                               lease_expires_at=now + timedelta(seconds=lease_left))
    half = exports_root() / f"{export.pk}.{token}.tmp"
    half.mkdir(parents=True)
    (half / "advantages.parquet").write_bytes(b"PAR1 half")
    return half


def test_the_sweep_queues_again_an_export_whose_worker_was_lost(sample_batch, researcher, filesystem_broker):
    export = launch(sample_batch, researcher)
    half = lost_worker(export)
    assert exports_sweep().requeued == 1
    export.refresh_from_db()
    assert (export.status, export.claim_token) == ("queued", "")
    assert export.error == "attempt 1 lost its worker; queued again"
    assert not half.exists()
    export_build(export.pk)
    export.refresh_from_db()
    assert (export.status, export.attempts, export.error) == ("done", 2, "")


def test_the_sweep_leaves_an_export_whose_lease_holds(sample_batch, researcher, filesystem_broker):
    export = launch(sample_batch, researcher)
    half = lost_worker(export, lease_left=20)
    assert exports_sweep().requeued == 0
    assert Export.objects.get(pk=export.pk).status == "running" and half.exists()


def test_the_sweep_fails_an_export_out_of_attempts(sample_batch, researcher, filesystem_broker, settings):
    settings.GAGAR_EXPORT_MAX_ATTEMPTS = 2
    export = launch(sample_batch, researcher)
    lost_worker(export, attempts=2)
    sweep = exports_sweep()
    export.refresh_from_db()
    assert (sweep.requeued, sweep.failed, export.status) == (0, 1, "failed")
    assert export.error == "gave up after 2 attempts: the last one lost its worker"
    assert list(exports_root().iterdir()) == []


def test_the_sweep_sends_again_an_export_whose_message_a_lost_worker_took_before_claiming_it(
        sample_batch, researcher, filesystem_broker):
    """Taken (prefetched) by a worker that died before it claimed the export: the row is
    queued and sent, and its queue holds no message. A moment after its message went out, a
    live worker may be about to claim it; 30 s after, it was lost."""
    export = launch(sample_batch, researcher)
    queued = Export.objects.filter(pk=export.pk)
    queued.update(sent_at=timezone.now())
    assert exports_sweep().sent == 0
    queued.update(sent_at=timezone.now() - timedelta(seconds=31))
    assert exports_sweep().sent == 1
    assert exports_sweep().sent == 0  # sent again just now
    queued.update(sent_at=timezone.now() - timedelta(seconds=31))
    assert exports_sweep().sent == 0  # its message waits in the queue: nothing was lost


@pytest.mark.django_db(transaction=True)  # as in a worker: the build closes its connection, in no transaction
def test_a_build_past_its_soft_time_limit_is_queued_again_not_failed(sample_batch, researcher, filesystem_broker,
                                                                     monkeypatch, settings):
    """As for a lost worker: another attempt, sent at once, until the attempts run out."""
    settings.GAGAR_EXPORT_MAX_ATTEMPTS = 2
    settings.GAGAR_EXPORT_SOFT_TIME_LIMIT = 60

    def slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(services, "write_counted", slow)
    export = launch(sample_batch, researcher)
    export_build(export.pk)
    export.refresh_from_db()
    assert (export.status, export.attempts, export.claim_token) == ("queued", 1, "")
    assert export.error == "attempt 1 ran past its soft time limit (60 s); queued again"
    assert export.sent_at is not None and list(exports_root().iterdir()) == []
    export_build(export.pk)
    export.refresh_from_db()
    assert (export.status, export.attempts) == ("failed", 2)
    assert export.error == "gave up after 2 attempts: the last one ran past its soft time limit (60 s)"
    assert list(exports_root().iterdir()) == []


def test_the_sweep_sends_an_unsent_export_and_again_one_sent_too_long_ago(sample_batch, researcher,
                                                                          filesystem_broker):
    unsent = launch(sample_batch, researcher)  # the test's transaction never commits: not sent
    assert Export.objects.get(pk=unsent.pk).sent_at is None
    assert exports_sweep(resend_after=3600).sent == 1
    sent_at = Export.objects.get(pk=unsent.pk).sent_at
    assert sent_at is not None and exports_sweep(resend_after=3600).sent == 0
    Export.objects.filter(pk=unsent.pk).update(sent_at=timezone.now() - timedelta(hours=2))
    assert exports_sweep(resend_after=3600).sent == 1


def test_export_file_names_only_the_files_of_the_export(sample_batch, researcher):
    export = launch(sample_batch, researcher)
    with pytest.raises(LookupError, match="is queued, not done"):
        export_file(export, "advantages.parquet")
    export_build(export.pk)
    export.refresh_from_db()
    with pytest.raises(LookupError, match="has no file named '../gagar.sqlite3'"):
        export_file(export, "../gagar.sqlite3")
    assert export_file(export, "manifest.json") == exports_root() / str(export.pk) / "manifest.json"
