"""Training runs through the API: steps attach to their run, a repeated or backward step is
refused naming the step it collides with, unknown runs and steps are 404 with the reason, the
stored figures and the whole run's export; and the client's fallback when the app is down is
on the scale of the app's own fallback (the same values)."""

import io
import json
import tarfile

import pytest
from gagar_client import Client

from tests.webapp.api.test_steps import ROLLOUTS, jsonl
from webapp.models import Batch, Run, RunStep
from webapp.runs.services import figures_refresh


@pytest.fixture
def api(client, researcher, bearer):
    headers = bearer(researcher)

    class Api:
        def submit(self, query, records=ROLLOUTS):
            return client.post(f"/api/steps?{query}", jsonl(records), content_type="application/x-ndjson",
                               headers=headers)

        def get(self, path):
            return client.get(f"/api/{path}", headers=headers)

    return Api()


@pytest.mark.django_db
def test_steps_attach_to_their_run_and_collisions_name_the_step(api):
    first = api.submit("run=trl-example&step=0").json()
    run = Run.objects.get(name="trl-example")
    assert (first["run"], first["run_id"], first["step"]) == ("trl-example", run.pk, 0)
    api.submit("run=trl-example&step=1")
    assert api.submit("run=trl-example&step=1").status_code == 202  # sent again unchanged: a retry
    other = [dict(r, group_id=r["group_id"] + "x") for r in ROLLOUTS]
    repeat = api.submit("run=trl-example&step=1", other)
    assert (repeat.status_code, repeat.json()) == (409, {"errors": [
        "run 'trl-example' already has step 1 (batch 'trl-example/step-1'); append to add to it (what was sent "
        "differs from what it holds)"]})
    back = api.submit("run=trl-example&step=0", other)
    assert back.status_code == 409 and "already has step 0" in back.json()["errors"][0]
    below = api.submit("run=other&step=5").status_code, api.submit("run=other&step=2")
    assert below[0] == 202 and below[1].status_code == 409
    assert below[1].json()["errors"][0].startswith("step 2 goes backwards: run 'other' is at step 5 (batch "
                                                   "'other/step-5')")
    assert api.submit("run=trl-example&step=1&append=true", other).json()["new_trajectories"] == len(other)
    assert api.submit("run=trailing%20&step=0").json() == {"errors": ["run: must not start or end with spaces"]}
    assert not Batch.objects.filter(name="other/step-2").exists()


@pytest.mark.django_db
def test_runs_steps_and_figures_read_back_and_unknown_ones_are_404_with_the_reason(api):
    batch_id = api.submit("run=r&step=3").json()["batch_id"]
    run = Run.objects.get(name="r")
    assert [r["name"] for r in api.get("runs?name=r").json()] == ["r"]
    detail = api.get(f"runs/{run.pk}").json()
    assert (detail["steps"], detail["latest_step"], detail["step_list"][0]["batch_id"]) == (1, 3, batch_id)
    assert api.get("runs/999999").json() == {"errors": ["no run with id 999999"]}
    missing = api.get(f"runs/{run.pk}/steps/4")
    assert (missing.status_code, missing.json()) == (404, {"errors": ["run 'r' has no step 4 (its steps run from 3 "
                                                                      "to 3)"]})
    assert api.get(f"runs/{run.pk}/steps/3").json()["measures"] is None  # not computed yet
    figures_refresh(batch_id)
    step = api.get(f"runs/{run.pk}/steps/3").json()
    assert step["measures"]["trajectories"] == 9 and step["updating"] is False
    assert api.get(f"runs/{run.pk}/figures").json()["steps"][0]["measures"] == step["measures"]
    api.get(f"steps/{batch_id}")  # the trainer reads its rewards: its wait is recorded
    assert api.get(f"runs/{run.pk}/steps/3").json()["trainer_wait_s"] >= 0


@pytest.mark.django_db
def test_the_whole_run_export_waits_for_grading_unless_asked(api):
    api.submit("run=r&step=0")
    run = Run.objects.get(name="r")
    waiting = api.get(f"runs/{run.pk}/advantages")
    assert waiting.status_code == 409 and "batch 'r/step-0'" in waiting.json()["errors"][0]
    response = api.get(f"runs/{run.pk}/advantages?allow_ungraded=true")
    with tarfile.open(fileobj=io.BytesIO(b"".join(response.streaming_content))) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("_manifest.json"))
    assert names == ["step=0/advantages.parquet", "_manifest.json"]
    assert manifest["steps"][0]["ungraded"]["groups"] == 2 and manifest["rows"] == 9


@pytest.mark.django_db(transaction=True)
def test_the_fallback_without_the_app_equals_the_apps_fallback(live_server, researcher, token_of):
    """The same step, once with the app up and its grading not done by the deadline (the app's
    GRPO advantages) and once with the app down (the client's): the trainer gets the same values."""
    records = [{"group_id": g, "trajectory_id": t, "reward": r, "patch": "p"} for g, t, r in (
        ("g1", "a", 1.0), ("g1", "b", 0.0), ("g1", "c", 0.25), ("g2", "b", 0.7), ("g2", "a", 0.1), ("g2", "c", 0.7),
        ("g3", "a", 1.0), ("g3", "b", 1.0))]
    for config in (None, {"unbiased_std": False}, {"norm_by_std": False}):
        with Client(live_server.url, token_of(researcher)) as up:
            served = up.grade_step(records, run=f"r-{json.dumps(config)}", step=0, deadline=0.5,
                                   advantage_config=config)
        with Client("http://127.0.0.1:9", "gagar_none", retries=0) as down:
            alone = down.grade_step(records, run="r", step=0, deadline=1, advantage_config=config)
        # g1 is mixed and not graded in time; g2 and g3 have nothing to rank: GRPO's values either way
        assert set(served.fallback) == {"g1"} and set(alone.fallback) == {"g1", "g2", "g3"}
        assert alone.rewards == served.rewards, config  # exactly: the same sums in the same order
    assert RunStep.objects.count() == 3
