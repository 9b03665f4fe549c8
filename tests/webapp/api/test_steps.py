"""Online steps without a worker: submit, retry, refuse bad input, and read each group's state.

Gradings are processed here in-process by the worker's own code (`gradings_process`); the
round trips through real worker processes are in test_roundtrip.py."""

import json
from dataclasses import fields

import pytest

from tests.factories import group
from tests.webapp.api.reference import core_advantages, varied
from webapp.advantages.config import DEFAULT_CONFIG, AdvantageConfig, parse_advantage_config
from webapp.annotation.services import ranking_save
from webapp.api.schemas import AdvantageOverrides
from webapp.grading.services import grading_run_cancel
from webapp.grading.worker import gradings_process
from webapp.models import Batch, Grading, GradingRun, Group

pytestmark = pytest.mark.django_db

ROLLOUTS = varied("g1", [1, 1, 0]) + varied("g2", [0, 1, 1, 0]) + group("g3", [1, 1])


def jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@pytest.fixture
def api(client, researcher, bearer):
    headers = bearer(researcher)

    class Api:
        def submit(self, records=ROLLOUTS, query="run=run-7&step=3"):
            return client.post(f"/api/steps?{query}", jsonl(records), content_type="application/x-ndjson",
                               headers=headers)

        def rewards(self, batch_id, wait=0):
            return client.get(f"/api/steps/{batch_id}?wait={wait}", headers=headers)

    return Api()


def process(batch):
    gradings_process(grading_ids=list(Grading.objects.filter(run__batch=batch).values_list("pk", flat=True)))


def test_a_step_becomes_a_batch_whose_mixed_groups_are_queued(api):
    response = api.submit()
    assert response.status_code == 202
    body = response.json()
    batch = Batch.objects.get(name="run-7/step-3")
    assert body == {"run": "run-7", "run_id": batch.run_step.run_id, "step": 3, "batch": "run-7/step-3",
                    "batch_id": batch.pk, "new_trajectories": 9, "groups": 3, "mixed": 2, "queued": 2}
    run = GradingRun.objects.get(batch=batch)
    assert run.grader == "heuristic" and run.gradings.count() == 2

    answer = api.rewards(batch.pk).json()
    assert answer["complete"] is False
    assert {g["group_id"]: g["state"] for g in answer["groups"]} == {"g1": "pending", "g2": "pending",
                                                                      "g3": "not_mixed"}
    for row in answer["trajectories"]:  # nothing ranked yet: GRPO's advantages
        assert row["reward_for_trainer"] == row["advantage"] == row["grpo_advantage"]


def test_sending_the_same_step_again_does_no_work_twice(api):
    first = api.submit().json()
    again = api.submit()
    assert again.status_code == 202
    assert again.json() == {**first, "new_trajectories": 0, "queued": 0}
    assert GradingRun.objects.count() == 1 and Grading.objects.count() == 2
    process(Batch.objects.get(pk=first["batch_id"]))
    assert api.submit().json()["queued"] == 0  # graded groups are not graded again
    assert Grading.objects.count() == 2


def test_graded_groups_get_the_core_advantages_of_the_rankings_the_grader_wrote(api):
    batch_id = api.submit(query="run=run-7&step=3&config=" + json.dumps({"params": {"w_min": 0.5}})).json()["batch_id"]
    batch = Batch.objects.get(pk=batch_id)
    process(batch)
    answer = api.rewards(batch_id, wait=5).json()
    assert answer["complete"] is True
    assert answer["config"]["params"] == {"w_min": 0.5} and answer["config"]["schedule"] == "linear"
    assert {g["group_id"]: (g["state"], g["reason"]) for g in answer["groups"]} == {
        "g1": ("graded", "ranked by the grader"), "g2": ("graded", "ranked by the grader"),
        "g3": ("not_mixed", "all_pass: no pass/fail mix to rank")}

    rows = answer["trajectories"]
    assert [r["reward_for_trainer"] for r in rows] == pytest.approx(core_advantages(batch, rows), abs=1e-12)
    g1 = [r for r in rows if r["group_id"] == "g1" and r["passed"]]
    assert g1[0]["reward_for_trainer"] != g1[1]["reward_for_trainer"]  # the ranking moved credit


def test_a_failed_grading_is_a_failed_group_with_its_reason(api, tmp_path, monkeypatch):
    profiles = tmp_path / "graders.toml"
    profiles.write_text('[graders.flaky]\ngrader = "tests.workers.graders:ScriptedGrader"\n'
                        'options = {fail_on = "g2$"}\n')
    monkeypatch.setenv("GAGAR_GRADERS", str(profiles))
    batch_id = api.submit(query="run=r&step=1&grader=flaky").json()["batch_id"]
    process(Batch.objects.get(pk=batch_id))
    answer = api.rewards(batch_id).json()
    states = {g["group_id"]: (g["state"], g["reason"]) for g in answer["groups"]}
    assert states["g1"] == ("graded", "ranked by the grader")
    assert states["g2"] == ("failed", "grading failed: cannot grade g2: <script>alert(1)</script> is not a patch")
    assert answer["complete"] is True


def test_bad_rollouts_config_or_grader_leave_nothing_behind(api):
    bad_line = api.submit(ROLLOUTS[:2] + [{"group_id": "g1", "trajectory_id": "t3", "patch": ""}])
    assert (bad_line.status_code, bad_line.json()) == (400, {"errors": ["step-3.jsonl:3: reward: missing (required)"]})
    bad_config = api.submit(query="run=r&step=1&config=" + json.dumps({"schedule": "nope"}))
    assert bad_config.status_code == 400
    assert bad_config.json()["errors"][0].startswith("config: unknown schedule 'nope'")
    bad_grader = api.submit(query="run=r&step=1&grader=gpt-judge")
    assert bad_grader.json() == {"errors": ["grader: unknown profile 'gpt-judge' (profiles: heuristic)"]}
    for config, error in (({"params": 5}, "query.config.params: Input should be a valid dictionary"),
                          ({"flag_names": 3}, "query.config.flag_names: Input should be a valid list"),
                          ({"colour": "red"}, "query.config.colour: Extra inputs are not permitted"),
                          ({"params": {"w_min": 3}}, "config: schedule 'linear': w_min must be in (0, 1], got 3.0")):
        response = api.submit(query="run=r&step=1&config=" + json.dumps(config))
        assert response.json()["errors"] == [error], config
    not_json = api.submit(query="run=r&step=1&config={")
    assert not_json.status_code == 422 and not_json.json()["errors"][0].startswith("query.config: Invalid JSON")
    for query in ("step=1", "run=r&step=-1", "run=%20r&step=1", "run=r&step=x"):
        assert api.submit(query=query).status_code == 422, query
    assert not Batch.objects.exists() and not GradingRun.objects.exists()


def test_a_steps_config_overrides_are_the_advantage_configs_fields_and_an_answered_config_goes_back_in():
    assert list(AdvantageOverrides.model_fields) == [f.name for f in fields(AdvantageConfig)]
    sent = AdvantageOverrides.model_validate_json(json.dumps(DEFAULT_CONFIG.as_dict()))
    assert parse_advantage_config(sent.model_dump(exclude_unset=True)) == DEFAULT_CONFIG


def test_an_unknown_step_is_404(api):
    response = api.rewards(12345)
    assert (response.status_code, response.json()) == (404, {"errors": [
        "no step with batch id 12345: it was never submitted, or its batch was deleted"]})


def test_a_cancelled_grading_is_a_cancelled_group_that_keeps_grpo(api, researcher, bearer, client):
    batch_id = api.submit().json()["batch_id"]
    batch = Batch.objects.get(pk=batch_id)
    gradings_process(grading_ids=[Grading.objects.get(run__batch=batch, group__group_id="g1").pk])
    run = GradingRun.objects.get(batch=batch)
    grading_run_cancel(run=run, user=researcher)  # g2 is still queued: it is never graded
    answer = api.rewards(batch_id).json()
    assert answer["complete"] is True
    assert {g["group_id"]: (g["state"], g["reason"]) for g in answer["groups"]} == {
        "g1": ("graded", "ranked by the grader"), "g2": ("cancelled", "grading cancelled: cancelled by rita"),
        "g3": ("not_mixed", "all_pass: no pass/fail mix to rank")}
    g2 = [r for r in answer["trajectories"] if r["group_id"] == "g2"]
    assert all(r["reward_for_trainer"] == r["grpo_advantage"] and r["source"] == "none" for r in g2)

    [status] = client.get(f"/api/batches/{batch_id}", headers=bearer(researcher)).json()["runs"]
    assert (status["state"], status["cancelled_by"]) == ("cancelled", "rita")
    assert status["counts"]["done"] == status["counts"]["cancelled"] == 1


def test_each_trajectory_carries_the_corrected_reward_of_the_advantages_endpoint(api, researcher, bearer, client):
    batch_id = api.submit().json()["batch_id"]
    process(Batch.objects.get(pk=batch_id))
    g2 = Group.objects.get(batch_id=batch_id, group_id="g2")
    ranking_save(group=g2, user=researcher, tiers=[["t1"], ["t2"], ["t3"]], flags={}, rationales={},
                 group_rationale="", based_on_version=0, grading_id=None,
                 verdicts={"t1": {"passed": True, "reason": "the test is flaky; the fix is right"}})
    rows = api.rewards(batch_id).json()["trajectories"]
    assert {(r["group_id"], r["trajectory_id"]): r["corrected_reward"] for r in rows
            if r["corrected_reward"] is not None} == {("g2", "t1"): 1.0}
    t1 = next(r for r in rows if (r["group_id"], r["trajectory_id"]) == ("g2", "t1"))
    assert (t1["reward"], t1["passed"], t1["source"]) == (0.0, True, "human") and t1["reward_for_trainer"] > 0
    exported = client.get(f"/api/batches/{batch_id}/advantages", headers=bearer(researcher))
    lines = [json.loads(line) for line in b"".join(exported.streaming_content).splitlines()]
    fields = ("corrected_reward", "passed", "reward_for_trainer")
    assert {(r["group_id"], r["trajectory_id"]): tuple(r[f] for f in fields) for r in rows} == {
        (r["group_id"], r["trajectory_id"]): tuple(r[f] for f in fields) for r in lines}
