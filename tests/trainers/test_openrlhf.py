"""OpenRLHF's remote reward requests, sent by OpenRLHF 0.11.2's own code, to
`python -m gagar_client.reward_server` running against the live app and a real worker.

The server runs as OpenRLHF's users run it, a process of its own (in this venv, where the
client is installed); tests/trainers/openrlhf_run.py (in .venv-verl, where OpenRLHF is
installed without its dependencies) posts the samples with
`SingleTurnAgentExecutor._fetch_rewards_via_http`. The step is test_verl.py's: three groups
of four responses, interleaved. A group the app does not rank gets the plain GRPO advantages
the app would give it, never its test scores.
"""

import functools
import json
import os
import socket
import subprocess
from collections import Counter

import httpx
import numpy as np
import pytest
from gagar_client.reward_server import group_key

from tests.trainers.conftest import core_advantages
from tests.trainers.test_verl import GROUPS, ROOT, VERL_PYTHON, step_samples

SCRIPT = ROOT / "tests" / "trainers" / "openrlhf_run.py"
RUN = "openrlhf"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reward_server(start_reward_server):
    """Starts the reward server for this run with the given options more; its log is read after."""
    return functools.partial(start_reward_server, run=RUN, group_size=4,
                             test_score="tests.trainers.openrlhf_score:tests_pass")


def server_log(tmp_path) -> str:
    return (tmp_path / "server.log").read_text()


def openrlhf_sample(sample: dict) -> dict:
    """A verl_step sample as OpenRLHF sends it: the query is the templated prompt and the response."""
    prompt = f"<|user|>\n{sample['prompt']}\n<|assistant|>\n"
    return {"query": prompt + sample["response"], "prompt": prompt, "label": sample["ground_truth"]}


def send(requests: list[list[dict]], *, url: str, tmp_path) -> dict:
    """openrlhf_run.py's output: each request's answer and the seconds it took."""
    assert VERL_PYTHON.exists(), "no .venv-verl: build it with `make install-verl`"
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"url": url, "requests": requests}))
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    done = subprocess.run([str(VERL_PYTHON), str(SCRIPT), str(job)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def by_patch(batch_name: str) -> dict[str, tuple[float, float]]:
    """patch -> (GAGAR advantage, plain GRPO advantage) of a step's trajectories (the step's
    patches are all different)."""
    from webapp.models import Trajectory

    advantages = core_advantages(batch_name)
    rows = Trajectory.objects.filter(batch__name=batch_name).values_list("group__group_id", "trajectory_id", "patch")
    return {patch: advantages[(group, trajectory)] for group, trajectory, patch in rows}


def test_two_requests_each_with_half_of_every_group_get_the_cores_advantages(
        reward_server, worker, tmp_path):
    from webapp.models import Batch, Trajectory

    url = reward_server()
    samples = step_samples()
    halves = [[], []]
    for task in sorted({s["index"] for s in samples}):
        group = [s for s in samples if s["index"] == task]
        halves[0] += group[:2]
        halves[1] += group[2:]
    out = send([[openrlhf_sample(s) for s in half] for half in halves], url=url, tmp_path=tmp_path)

    expected = by_patch(f"{RUN}/step-0")
    for half, answer in zip(halves, out["answers"], strict=True):
        np.testing.assert_allclose(answer["rewards"], [expected[s["response"]][0] for s in half], rtol=0, atol=1e-6)
        assert answer["scores"] == [1.0 if "FIXED" in s["response"] else 0.0 for s in half]
    gagar, grpo = np.array(list(expected.values())).T
    assert np.abs(gagar - grpo).max() > 0.1, "the grader's rankings moved no credit: nothing was tested"
    assert list(Batch.objects.filter(name__startswith=f"{RUN}/").values_list("name", flat=True)) == [f"{RUN}/step-0"]
    assert Batch.objects.get(name=f"{RUN}/step-0").run_step.run.name == RUN  # a step of its run
    groups = Counter(Trajectory.objects.filter(batch__name=f"{RUN}/step-0").values_list("group__group_id", flat=True))
    assert sorted(groups.values()) == [4, 4, 4], "the halves were not graded as whole groups"
    assert "keep" not in server_log(tmp_path)


def test_an_incomplete_group_gets_its_test_scores_after_its_timeout_without_holding_up_the_others(
        reward_server, worker, tmp_path):
    from webapp.models import Batch, Group

    url = reward_server(group_timeout=4)
    samples = step_samples()
    samples.remove(next(s for s in samples if s["index"] == "task-c"))  # a response lost
    # OpenRLHF 0.9 and later: one request per sample, as each finishes.
    out = send([[openrlhf_sample(s)] for s in samples], url=url, tmp_path=tmp_path)

    expected = by_patch(f"{RUN}/step-0")
    rewards = [answer["rewards"][0] for answer in out["answers"]]
    complete = [i for i, s in enumerate(samples) if s["index"] != "task-c"]
    incomplete = [i for i, s in enumerate(samples) if s["index"] == "task-c"]
    np.testing.assert_allclose([rewards[i] for i in complete], [expected[samples[i]["response"]][0] for i in complete],
                               rtol=0, atol=1e-6)
    assert [rewards[i] for i in incomplete] == [1.0 if "FIXED" in samples[i]["response"] else 0.0
                                                for i in incomplete]
    assert min(out["seconds"][i] for i in incomplete) >= 4
    # Not held up: the complete groups' step reached the app within the 4 s the lost response's
    # group waits (held up, it could not before); grading them takes what the machine's load makes it.
    assert Batch.objects.get(name=f"{RUN}/step-0").created_at.timestamp() - out["started_at"] < 4
    lost = group_key(openrlhf_sample(samples[incomplete[0]])["prompt"])
    assert Group.objects.filter(batch__name__startswith=f"{RUN}/").count() == 2
    assert not Group.objects.filter(batch__name__startswith=f"{RUN}/", group_id__startswith=lost).exists()
    assert "has 3 of 4 responses after 4 s; they keep their test scores" in server_log(tmp_path)


def test_a_bad_request_gets_400_with_its_reason_and_parks_nothing(reward_server, worker, tmp_path):
    from webapp.models import Trajectory

    url = reward_server()
    group = [openrlhf_sample(s) for s in step_samples() if s["index"] == "task-a"]
    queries, prompts, labels = ([s[key] for s in group] for key in ("query", "prompt", "label"))
    bad = {
        b"{not json": "the body is not JSON",
        json.dumps({"prompts": prompts}).encode(): "with a 'query' list",
        json.dumps({"query": queries}).encode(): "no 'prompts' list: GAGAR finds each response's group by its prompt",
        json.dumps({"query": queries, "prompts": prompts, "labels": labels[:3]}).encode():
            "'query', 'prompts' and 'labels' must be equally long; got 4, 4 and 3",
        json.dumps({"query": queries[:3], "prompts": [1, 2, 3]}).encode(): "'prompts' must be a list of strings",
        json.dumps({"query": queries, "group_keys": ["a"] * 4}).encode():
            "no 'prompts' list: the response is the query less its prompt (or send 'responses')",
        json.dumps({"query": queries, "prompts": prompts, "test_scores": ["1"] * 4}).encode():
            "'test_scores' must be a list of finite numbers",
        json.dumps({"query": queries, "prompts": prompts, "labels": labels, "test_scores": [1, 0, 1]}).encode():
            "'query', 'prompts', 'labels' and 'test_scores' must be equally long; got 4, 4, 4 and 3",
        json.dumps({"responses": queries, "group_keys": ["a"] * 4}).encode():
            "no 'test_scores': --test-score is called with each sample's query and prompt",
        json.dumps({"query": queries, "prompts": prompts, "group_size": 8}).encode():
            "this server groups 4 responses (--group-size); the request expects 8",
    }
    for body, reason in bad.items():
        answer = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert answer.status_code == 400, answer.text
        assert reason in answer.json()["error"]

    # Had any bad request parked its samples, this group would be completed by them instead.
    answer = httpx.post(url, json={"query": queries, "prompts": prompts, "labels": labels}, timeout=60)
    assert answer.status_code == 200, answer.text
    expected = by_patch(f"{RUN}/step-0")
    np.testing.assert_allclose(answer.json()["rewards"], [expected[q.removeprefix(p)][0] for q, p in
                                                          zip(queries, prompts, strict=True)], rtol=0, atol=1e-6)
    assert Trajectory.objects.filter(batch__name=f"{RUN}/step-0").count() == 4


@pytest.mark.parametrize("app", ["unreachable", "never answering"])
def test_an_app_that_grades_nothing_gives_openrlhf_plain_grpo_on_the_apps_scale(app, reward_server, tmp_path):
    from grading.advantages import grpo_advantages

    with socket.create_server(("127.0.0.1", 0)) as listener:  # takes connections, never answers
        app_url = "http://127.0.0.1:9" if app == "unreachable" else f"http://127.0.0.1:{listener.getsockname()[1]}"
        # Never answering, the latest step and the step each wait out the 4 s timeout: 8 s, past the
        # 7 s the server allows a request; the grading's own bound (1 + 4 s) answers first.
        url = reward_server(app_url=app_url, deadline=1, timeout=4, group_timeout=1, batch_window=0)
        samples = step_samples()
        out = send([[openrlhf_sample(s)] for s in samples], url=url, tmp_path=tmp_path)

    tasks = sorted(GROUPS)
    scores = [1.0 if "FIXED" in s["response"] else 0.0 for s in samples]
    grpo = grpo_advantages(np.array(scores), np.array([tasks.index(s["index"]) for s in samples]))
    np.testing.assert_allclose([answer["rewards"][0] for answer in out["answers"]], grpo, rtol=0, atol=1e-6)
    assert [answer["scores"][0] for answer in out["answers"]] == scores
    assert max(out["seconds"]) < 7
    reason = {"unreachable": "gets its plain GRPO advantages (app unreachable",
              "never answering": "the app did not answer within 5 s; its 4 responses get their plain GRPO advantages"}
    assert server_log(tmp_path).count(reason[app]) == 3
