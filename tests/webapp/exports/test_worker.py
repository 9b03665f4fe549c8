"""Exports built by real Celery worker processes, and one whose worker is killed mid-build."""

import pytest

from tests.workers.conftest import make_batch, wait_until
from webapp.advantages.config import parse_advantage_config
from webapp.exports.advantages import write_advantages
from webapp.exports.selectors import export_file, exports_root
from webapp.exports.services import export_launch, exports_sweep
from webapp.models import Export
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db(transaction=True)


def reference(batch, tmp_path, export) -> bytes:
    """The same export written in this process."""
    path = tmp_path / f"reference.{export.format}"
    write_advantages(batch, path, viewer=UNRESTRICTED, format=export.format,
                     config=parse_advantage_config(export.config))
    return path.read_bytes()


def status(export) -> Export:
    return Export.objects.get(pk=export.pk)


def test_the_embedded_default_builds_an_export_in_a_worker(tmp_path, filesystem_broker, workers, researcher):
    batch = make_batch(tmp_path, "exported", 20)
    workers(filesystem_broker, concurrency=1)
    export = export_launch(batch=batch, kind="advantages", format="parquet", config={"params": {"w_min": 0.5}},
                           user=researcher)
    wait_until(lambda: status(export).status == "done", timeout=60, message="export never finished")
    export.refresh_from_db()
    assert export.rows_done == export.rows_total == 62 and export.attempts == 1
    assert export_file(export, "advantages.parquet").read_bytes() == reference(batch, tmp_path, export)
    assert sorted(p.name for p in exports_root().iterdir()) == [str(export.pk)]


@pytest.mark.slow
def test_an_export_whose_worker_is_killed_midway_is_built_again_whole(tmp_path, redis_broker, workers, researcher):
    batch = make_batch(tmp_path, "killed", 300)
    # One group a chunk: 301 chunks, each committing its progress, so the kill lands midway.
    env = {**redis_broker, "GAGAR_EXPORT_CHUNK_GROUPS": "1"}
    first = workers(env, concurrency=1)
    export = export_launch(batch=batch, kind="advantages", format="jsonl", config={}, user=researcher)
    wait_until(lambda: status(export).rows_done > 0 or status(export).status not in ("queued", "running"),
               timeout=60, every=0.01, message="export never started")
    first.kill()
    killed = status(export)
    assert killed.status == "running", (killed.status, killed.error, first.output())
    assert 0 < killed.rows_done < killed.rows_total == 902
    half = exports_root() / f"{export.pk}.{killed.claim_token}.tmp"
    assert half.is_dir() and not (exports_root() / str(export.pk)).exists()  # a half file, never in place

    # Default settings: the lease the killed worker no longer renews runs out within seconds.
    wait_until(lambda: exports_sweep().requeued == 1, timeout=60, every=1, message="lease never ran out")
    assert not half.exists()
    workers(env, concurrency=1, log="worker2.log")
    wait_until(lambda: status(export).status == "done", timeout=120, message="export never finished")
    export.refresh_from_db()
    assert export.attempts == 2 and export.rows_done == 902
    assert export_file(export, "advantages.jsonl").read_bytes() == reference(batch, tmp_path, export)
    assert sorted(p.name for p in exports_root().iterdir()) == [str(export.pk)]


def test_an_export_launched_while_the_broker_is_down_is_built_once_it_is_back(tmp_path, redis_server, own_broker,
                                                                              workers, researcher):
    batch = make_batch(tmp_path, "outage", 5)
    redis_server.stop()
    export = export_launch(batch=batch, kind="advantages", format="jsonl", config={}, user=researcher)
    queued = status(export)
    assert (queued.status, queued.sent_at) == ("queued", None)  # kept, and known to be unsent
    assert exports_sweep().sent == 0  # still down: the sweep says so and keeps it
    redis_server.start()
    workers(own_broker, concurrency=1)
    assert exports_sweep().sent == 1
    wait_until(lambda: status(export).status == "done", timeout=60, message="export never finished")
    assert export_file(status(export), "advantages.jsonl").read_bytes() == reference(batch, tmp_path, export)
