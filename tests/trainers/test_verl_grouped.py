"""verl 0.9.1's reward loop, one response per call, on `gagar_client.grouped.compute_score`
against the running app.

tests/trainers/verl_grouped_run.py (in .venv-verl) builds verl's `RewardLoopWorker` with the
`naive` manager and scores every sample of a step in a task of its own, concurrently; the
groups are interleaved as in test_verl.py. Each score must be the advantage the core
computes from the worker's rankings, the same as the batch path's for the same step. A
group the app does not rank (late, unreachable, refusing it) gets the plain GRPO advantages
the app would give it, never its test scores beside the other groups' normalised values.
"""

import asyncio
import json
import os
import subprocess
from collections import Counter

import httpx
import numpy as np
import pytest
from gagar_client import Client, GagarAPIError
from gagar_client.grouped import compute_score
from gagar_client.steps import Sample, group_records

from tests.trainers.conftest import core_advantages
from tests.trainers.test_verl import GROUPS, ROOT, VERL_PYTHON, step_samples

SCRIPT = ROOT / "tests" / "trainers" / "verl_grouped_run.py"
RUN = "verl-grouped"
REWARD_KWARGS = {"test_score": "verl_step:tests_pass", "group_size": 4}

pytestmark = pytest.mark.django_db(transaction=True)


def run_grouped(samples, *, tmp_path, token, tokenizer, batch_url=None, workers=None,
                **reward_kwargs) -> tuple[dict, str]:
    """verl_grouped_run.py's output and its log (stderr)."""
    assert VERL_PYTHON.exists(), "no .venv-verl: build it with `make install-verl`"
    job = {"tokenizer": str(tokenizer), "samples": samples, "reward_kwargs": {**REWARD_KWARGS, **reward_kwargs}}
    if batch_url:
        job["batch_kwargs"] = {"url": batch_url, "run": "verl-batch", "test_score": "verl_step:tests_pass",
                               "group_size": 4}
    if workers:
        job["workers"] = workers
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env.update(GAGAR_TOKEN=token, HF_HUB_OFFLINE="1")
    done = subprocess.run([str(VERL_PYTHON), str(SCRIPT), str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout), done.stderr


def by_patch(batch_name: str) -> dict[tuple[str, str], tuple[float, float]]:
    """(task, patch) -> (GAGAR advantage, plain GRPO advantage) of a step's trajectories: the
    grouped path numbers a group's trajectories in arrival order, not batch order."""
    from webapp.models import Trajectory

    advantages = core_advantages(batch_name)
    rows = Trajectory.objects.filter(batch__name=batch_name).values_list("group__group_id", "trajectory_id", "patch")
    return {(group.split(":")[0], patch): advantages[(group, trajectory)] for group, trajectory, patch in rows}


def test_each_response_gets_its_groups_gagar_advantage_as_on_the_batch_path(
        live_server, token, worker, tiny_model, tmp_path):
    from webapp.models import Batch

    samples = step_samples()
    out, log = run_grouped(samples, tmp_path=tmp_path, token=token, tokenizer=tiny_model, url=live_server.url,
                           run=RUN, batch_url=live_server.url)

    expected = by_patch(f"{RUN}/step-0")
    gagar = np.array([expected[(s["index"], s["response"])][0] for s in samples])
    grpo = np.array([expected[(s["index"], s["response"])][1] for s in samples])
    np.testing.assert_allclose(out["scores"], gagar, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out["scores"], out["batch_scores"], rtol=0, atol=1e-6)
    assert np.abs(gagar - grpo).max() > 0.1, "the grader's rankings moved no credit: nothing was tested"
    assert list(Batch.objects.filter(name__startswith=f"{RUN}/").values_list("name", flat=True)) == [f"{RUN}/step-0"]
    assert "keep" not in log


def test_an_incomplete_group_keeps_its_test_scores_after_its_timeout_without_holding_up_the_others(
        live_server, token, worker, tiny_model, tmp_path):
    from webapp.models import Batch, Group

    samples = step_samples()
    samples.remove(next(s for s in samples if s["index"] == "task-c"))  # a response scored elsewhere
    out, log = run_grouped(samples, tmp_path=tmp_path, token=token, tokenizer=tiny_model, url=live_server.url,
                           run=RUN, group_timeout=5)

    expected = by_patch(f"{RUN}/step-0")
    complete = [i for i, s in enumerate(samples) if s["index"] != "task-c"]
    incomplete = [i for i, s in enumerate(samples) if s["index"] == "task-c"]
    np.testing.assert_allclose([out["scores"][i] for i in complete],
                               [expected[(samples[i]["index"], samples[i]["response"])][0] for i in complete],
                               rtol=0, atol=1e-6)
    assert [out["scores"][i] for i in incomplete] == [1.0 if "FIXED" in samples[i]["response"] else 0.0
                                                      for i in incomplete]
    assert min(out["seconds"][i] for i in incomplete) >= 5
    # Not held up: the complete groups' step reached the app within the 5 s the lost response's
    # group waits (held up, it could not before); grading them takes what the machine's load makes it.
    assert Batch.objects.get(name=f"{RUN}/step-0").created_at.timestamp() - out["started_at"] < 5
    assert not Group.objects.filter(batch__name__startswith=f"{RUN}/", group_id__startswith="task-c").exists()
    assert "group task-c has 3 of 4 responses after 5 s; they keep their test scores" in log


def passes(response: str) -> float:
    return 1.0 if "FIXED" in response else 0.0


def plain_grpo(samples) -> np.ndarray:
    """What the app's plain GRPO gives each sample's test score, under the default config."""
    from grading.advantages import grpo_advantages

    tasks = sorted(GROUPS)
    return grpo_advantages(np.array([passes(s["response"]) for s in samples]),
                           np.array([tasks.index(s["index"]) for s in samples]))


@pytest.mark.parametrize("app", ["late", "unreachable"])
def test_a_step_the_app_does_not_grade_gets_plain_grpo_on_the_apps_scale(app, live_server, token, tiny_model,
                                                                         tmp_path):
    samples = step_samples()  # late: no worker, the mixed groups stay queued past the 1 s deadline
    url = live_server.url if app == "late" else "http://127.0.0.1:9"
    out, log = run_grouped(samples, tmp_path=tmp_path, token=token, tokenizer=tiny_model, url=url, run=RUN,
                           deadline=1)

    np.testing.assert_allclose(out["scores"], plain_grpo(samples), rtol=0, atol=1e-6)
    reason = "(timeout" if app == "late" else "(app unreachable"
    assert log.count(f"gets its plain GRPO advantages {reason}") == (2 if app == "late" else 3)  # late: b all pass


def test_a_group_the_app_refuses_gets_its_plain_grpo_beside_the_others(live_server, token, monkeypatch, caplog):
    """In this process, as verl's reward-loop worker calls it: the app refuses task-a's group (another
    writer holds its name in the step), and grades none of the others in time (no worker)."""
    monkeypatch.setenv("GAGAR_TOKEN", token)
    run, samples = "verl-refused", step_samples()

    async def tests_pass(solution_str, **_):  # a coroutine: each call parks in the order its task starts
        return passes(solution_str)

    async def score(tasks):
        chosen = [s for task in tasks for s in samples if s["index"] == task]
        values = await asyncio.gather(*(
            compute_score("swe", s["response"], "FIXED", {"index": s["index"]}, test_score=tests_pass, group_size=4,
                          url=live_server.url, run=run, deadline=2, batch_window=0.5) for s in chosen))
        return chosen, values

    asyncio.run(score(["task-b"]))  # the run's step 0: the next request is its step 1
    refused = [s for s in samples if s["index"] == "task-a"]
    taken = group_records("task-a", [Sample(reward=passes(s["response"]), patch=s["response"],
                                            messages=[{"role": "assistant", "content": s["response"]}])
                                     for s in refused], position=0, statement=None, pass_threshold=1.0)[0]["group_id"]
    with Client(live_server.url, token) as app:
        app.grade_step([{"group_id": taken, "trajectory_id": "r1", "reward": 0.5, "patch": "another"}], run=run,
                       step=1, deadline=0)

    with caplog.at_level("WARNING", logger="gagar_client"):
        chosen, values = asyncio.run(score(["task-a", "task-c"]))

    np.testing.assert_allclose(values, plain_grpo(chosen), rtol=0, atol=1e-6)
    assert any(message.startswith(f"GAGAR {run}: group 'task-a' is not graded, the app refused it: ")
               and message.endswith("its 4 responses get their plain GRPO advantages") for message in caplog.messages)
    assert any(f"GAGAR {run} step 1: group task-c:" in message and "gets its plain GRPO advantages (timeout" in message
               for message in caplog.messages)


def test_more_responses_per_prompt_than_group_size_is_named(monkeypatch, caplog):
    """In this process, as verl's reward-loop worker calls it: eight responses of one prompt with
    group_size 4 complete a group, then start another of the same prompt, which is said."""
    monkeypatch.setenv("GAGAR_TOKEN", "unused")
    group = [s for s in step_samples() if s["index"] == "task-a"]

    async def score():
        return await asyncio.gather(*(
            compute_score("swe", s["response"], "FIXED", {"index": "task-a"}, test_score=lambda **_: 1.0,
                          group_size=4, url="http://127.0.0.1:9", run="verl-more", deadline=1, batch_window=0)
            for s in group + group))

    with caplog.at_level("WARNING", logger="gagar_client"):
        asyncio.run(score())

    assert sum("GAGAR verl-more: group 'task-a' has another response within 60 s of its 4 being complete: more "
               "responses per prompt than group_size?" in message for message in caplog.messages) == 1


def test_two_reward_loop_workers_each_with_half_of_every_group_get_the_cores_advantages_through_one_server(
        start_reward_server, token, worker, tiny_model, tmp_path):
    from webapp.models import Batch, Trajectory

    buffer_url = start_reward_server(run=RUN, group_size=4)  # no --test-score: the workers send theirs
    samples = step_samples()
    halves = [[], []]  # as verl's random dispatch splits them: every group across both workers
    seen = Counter()
    for i, sample in enumerate(samples):
        halves[seen[sample["index"]] % 2].append(i)
        seen[sample["index"]] += 1
    out, log = run_grouped(samples, tmp_path=tmp_path, token=token, tokenizer=tiny_model, buffer_url=buffer_url,
                           workers=halves)

    expected = by_patch(f"{RUN}/step-0")
    gagar = np.array([expected[(s["index"], s["response"])][0] for s in samples])
    grpo = np.array([expected[(s["index"], s["response"])][1] for s in samples])
    np.testing.assert_allclose(out["scores"], gagar, rtol=0, atol=1e-6)
    assert np.abs(gagar - grpo).max() > 0.1, "the grader's rankings moved no credit: nothing was tested"
    assert list(Batch.objects.filter(name__startswith=f"{RUN}/").values_list("name", flat=True)) == [f"{RUN}/step-0"]
    assert Batch.objects.get(name=f"{RUN}/step-0").run_step.run.name == RUN  # a step of its run
    groups = Counter(Trajectory.objects.filter(batch__name=f"{RUN}/step-0").values_list("group__group_id", flat=True))
    assert sorted(groups.values()) == [4, 4, 4], "the halves were not graded as whole groups"
    assert "keep" not in log
    assert "keep" not in (tmp_path / "server.log").read_text()


def test_the_reward_server_refuses_what_it_cannot_grade_and_parks_nothing_and_the_call_raises_its_reason(
        start_reward_server, worker):
    from webapp.models import Trajectory

    buffer_url = start_reward_server(run=RUN, group_size=4)
    group = [s for s in step_samples() if s["index"] == "task-a"]
    unscored = {"responses": [group[0]["response"]], "group_keys": ["task-a"]}
    answer = httpx.post(buffer_url, json=unscored, timeout=10)
    assert answer.status_code == 400
    assert "no 'test_scores', and this server was started without --test-score" in answer.json()["error"]

    def call(**reward_kwargs):
        return asyncio.run(compute_score("swe", group[0]["response"], "FIXED", {"index": "task-a"},
                                         test_score=lambda **_: 1.0, buffer_url=buffer_url, **reward_kwargs))

    with pytest.raises(GagarAPIError, match=r"groups 4 responses \(--group-size\); the request expects 8"):
        call(group_size=8)
    with pytest.raises(ValueError, match="the reward server grades, with its own options; drop url, run"):
        call(group_size=4, url="http://elsewhere", run="other")

    # Had a refused sample been parked, it would take the place of one of these in the group.
    scored = {"responses": [s["response"] for s in group], "group_keys": ["task-a"] * 4,
              "test_scores": [1.0 if "FIXED" in s["response"] else 0.0 for s in group], "group_size": 4}
    answer = httpx.post(buffer_url, json=scored, timeout=60)
    assert answer.status_code == 200, answer.text
    patches = Trajectory.objects.filter(batch__name=f"{RUN}/step-0").values_list("patch", flat=True)
    assert sorted(patches) == sorted(s["response"] for s in group)


def test_the_reward_server_down_leaves_the_test_scores_at_once_and_says_so(tiny_model, tmp_path):
    samples = step_samples()
    out, log = run_grouped(samples, tmp_path=tmp_path, token="unused", tokenizer=tiny_model,
                           buffer_url="http://127.0.0.1:9/get_reward")

    assert out["scores"] == [1.0 if "FIXED" in s["response"] else 0.0 for s in samples]
    assert max(out["seconds"]) < 5  # its bound is 60 + 1 + 60 + 30 s: a refused connection is not waited out
    assert log.count("GAGAR reward server http://127.0.0.1:9/get_reward: no answer (ConnectError") == len(samples)
