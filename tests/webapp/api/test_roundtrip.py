"""The API over real HTTP (a live server) with the client, graded by a real worker on Redis."""

import hashlib
import io
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from gagar_client import Client, GagarAPIError

from grading.advantages import grpo_advantages
from tests.factories import group, write_jsonl
from tests.webapp.api.reference import core_advantages, varied
from webapp.models import Batch, Grading

pytestmark = pytest.mark.django_db(transaction=True)

STEP = varied("g1", [1, 1, 0]) + varied("g2", [0, 1, 1, 0]) + varied("g3", [1, 1, 1, 0]) + group("g4", [0, 0])


@pytest.fixture
def client_of(live_server, token_of):
    """`client_of(user)`: the Python client, talking to the live server with a token of `user`."""
    made = []

    def make(user, **options):
        made.append(Client(live_server.url, token_of(user), **options))
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_upload_grade_download_equals_the_core_on_the_workers_rankings(tmp_path, client_of, researcher,
                                                                     redis_broker, workers):
    workers(redis_broker)
    api = client_of(researcher)
    path = write_jsonl(tmp_path / "run-7.jsonl.gz", STEP)
    uploaded = api.upload(path, batch="run-7/step-120")
    assert uploaded["created"] and uploaded["new_trajectories"] == len(STEP)
    assert api.status("run-7/step-120")["labels"] == {"mixed": 3, "all_pass": 0, "all_fail": 1, "singleton": 0}

    launch = api.grade("run-7/step-120")
    assert launch["queued"] == 3
    rows = api.wait_for_advantages("run-7/step-120", timeout=60)

    batch = Batch.objects.get(name="run-7/step-120")
    assert not Grading.objects.filter(run__batch=batch).exclude(status="done").exists()
    assert len(rows) == len(STEP)
    assert {r["source"] for r in rows if r["label"] == "mixed"} == {"grader"}
    assert [r["advantage"] for r in rows] == pytest.approx(core_advantages(batch, rows), abs=1e-12)
    assert [r["reward_for_trainer"] for r in rows] == [r["advantage"] for r in rows]

    table = pq.read_table(io.BytesIO(api.wait_for_advantages("run-7/step-120", timeout=5, format="parquet")))
    assert table.column("advantage").to_pylist() == [r["advantage"] for r in rows]
    status = api.status("run-7/step-120")
    assert status["gradings"]["done"] == 3 and status["graded"] == 3 and not status["grading_active"]


def test_grade_step_returns_the_gagar_reward_of_every_trajectory(client_of, researcher, redis_broker, workers):
    workers(redis_broker)
    api = client_of(researcher)
    result = api.grade_step(STEP, run="run-8", step=1, deadline=60)
    assert result.batch == "run-8/step-1"
    assert result.fallback == {}
    keys = [(r["group_id"], r["trajectory_id"]) for r in STEP]
    assert list(result.rewards) == keys

    batch = Batch.objects.get(name="run-8/step-1")
    rows = [{**r, "passed": r["reward"] >= 1} for r in STEP]
    assert [result.rewards[k] for k in keys] == pytest.approx(core_advantages(batch, rows), abs=1e-12)
    g3 = [result.rewards[("g3", t)] for t in ("t1", "t2", "t3")]
    assert len(set(g3)) > 1  # the grader's ranking moved credit between passing trajectories

    again = api.grade_step(STEP, run="run-8", step=1, deadline=60)
    assert again.rewards == result.rewards
    assert Grading.objects.filter(run__batch=batch).count() == 3  # the retried step did no work twice


def test_groups_not_graded_by_the_deadline_fall_back_to_grpo(client_of, researcher, redis_broker):
    """No worker runs: nothing gets graded."""
    api = client_of(researcher, timeout=10)
    started = time.monotonic()
    result = api.grade_step(STEP, run="run-9", step=4, deadline=1.0)
    assert time.monotonic() - started < 1.0 + api.timeout
    assert result.fallback == dict.fromkeys(("g1", "g2", "g3"), "timeout: not graded within 1 s")

    batch = Batch.objects.get(name="run-9/step-4")
    assert not batch.groups.filter(gradings__status="done").exists()
    rows = [{**r, "passed": r["reward"] >= 1} for r in STEP]
    # With no ranking the core's advantages are GRPO's: what every fallback group gets.
    assert [result.rewards[(r["group_id"], r["trajectory_id"])] for r in rows] == pytest.approx(
        core_advantages(batch, rows), abs=1e-12)
    assert result.rewards[("g1", "t1")] > 0 > result.rewards[("g1", "t3")]


def test_an_unreachable_app_gives_plain_grpo_on_the_apps_scale(researcher):
    api = Client("http://127.0.0.1:9", "gagar_whatever", retries=2, backoff=0.01)
    result = api.grade_step(STEP, run="r", step=1, deadline=5)
    api.close()
    keys = [(r["group_id"], r["trajectory_id"]) for r in STEP]
    rows = [{**r, "passed": r["reward"] >= 1} for r in STEP]
    assert [result.rewards[k] for k in keys] == pytest.approx(grpo_advantages(
        np.array([r["reward"] for r in rows]), np.unique([r["group_id"] for r in rows], return_inverse=True)[1]),
        abs=1e-12)
    assert set(result.fallback) == {"g1", "g2", "g3", "g4"}
    assert all(reason.startswith("app unreachable: cannot connect to http://127.0.0.1:9")
               for reason in result.fallback.values())


def test_a_mistake_in_the_call_raises_instead_of_falling_back(client_of, researcher, annotator, redis_broker):
    with pytest.raises(GagarAPIError) as refused:
        client_of(annotator).grade_step(STEP, run="r", step=1, deadline=5)
    assert (refused.value.status, refused.value.errors) == (403, ["needs the role researcher"])
    bad = [dict(STEP[0], reward="high")] + STEP[1:]
    with pytest.raises(GagarAPIError) as invalid:
        client_of(researcher).grade_step(bad, run="r", step=1, deadline=5)
    assert invalid.value.errors == ["step-1.jsonl:1: reward: must be a number, got a string"]
    with pytest.raises(GagarAPIError) as unknown:
        client_of(researcher).status("no-such-batch")
    assert unknown.value.status == 404


def test_an_export_is_built_by_a_worker_and_downloaded(tmp_path, client_of, researcher, redis_broker, workers):
    workers(redis_broker)
    api = client_of(researcher)
    api.upload(write_jsonl(tmp_path / "b.jsonl", STEP), batch="b")
    with pytest.raises(GagarAPIError) as refused:
        api.export("b", format="csv")
    assert refused.value.status == 422
    with pytest.raises(GagarAPIError) as bad:
        api.export("b", config={"schedule": "nope"})
    assert bad.value.status == 400 and bad.value.errors[0].startswith("config: unknown schedule 'nope'")

    export = api.export("b", format="jsonl", config={"params": {"w_min": 0.5}})
    assert export["status"] in ("queued", "running", "done") and export["batch"] == "b"
    done = api.export_status(export["id"], wait=60)
    assert done["status"] == "done", done
    files = {f["name"]: f for f in done["files"]}
    assert set(files) == {"advantages.jsonl", "manifest.json"}
    data = api.download(export["id"], "advantages.jsonl", tmp_path / "out.jsonl")
    assert hashlib.sha256(data.read_bytes()).hexdigest() == files["advantages.jsonl"]["sha256"]
    assert len(data.read_text().splitlines()) == len(STEP)
    with pytest.raises(GagarAPIError) as missing:
        api.download(export["id"], "../../secret", tmp_path / "x")
    assert missing.value.status == 404
