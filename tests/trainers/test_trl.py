"""TRL's own `GRPOTrainer` trained a few steps on the rewards `gagar_client.trl.gagar_reward` gets
from the running app: the advantages TRL computed must equal `grading.advantages` on the
rankings the worker wrote. A step the app does not grade (unreachable, late) trains on the
plain GRPO advantages the app would give, never on raw test rewards. And the ways a
misconfigured reward function is refused."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.trainers.conftest import core_advantages
from tests.trainers.trl_run import GENERATIONS, RUN, train

ROOT = Path(__file__).resolve().parents[2]


def assert_trained_on_core_advantages(rounds):
    """Each round's advantages, as TRL computed them, equal the core's on the worker's rankings."""
    moved = 0.0
    for step, tasks, advantages in rounds:
        expected = core_advantages(f"{RUN}/step-{step}")
        group_of = {key[0].split(":")[0]: key[0] for key in expected}
        keys = [(group_of[task], f"r{i % GENERATIONS + 1}") for i, task in enumerate(tasks)]
        np.testing.assert_allclose(advantages, [expected[key][0] for key in keys], rtol=0, atol=1e-5)
        moved = max(moved, max(abs(expected[key][0] - expected[key][1]) for key in keys))
    assert moved > 0.05, "the grader's rankings moved no credit: nothing was tested"


@pytest.mark.django_db(transaction=True)
def test_trl_trains_on_the_advantages_the_core_computes_from_the_workers_rankings(
        live_server, token, worker, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rounds = train(url=live_server.url, token=token, model=tiny_model, output_dir=tmp_path, prompts_per_step=2)

    assert [step for step, _, _ in rounds] == [0, 1]
    assert_trained_on_core_advantages(rounds)
    from webapp.models import RunStep

    # the steps attached to their run, whose page charts them
    assert list(RunStep.objects.filter(run__name=RUN).values_list("number", "batch__name")) == [
        (0, f"{RUN}/step-0"), (1, f"{RUN}/step-1")]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_groups_split_across_two_processes_are_graded_whole(live_server, token, worker, tiny_model, tmp_path):
    # Three groups of four over two processes of six completions: the second group spans both.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(GAGAR_TOKEN=token, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           str(ROOT / "tests" / "trainers" / "trl_run.py"), live_server.url, str(tiny_model),
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    ranks = [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [len(r) for r in ranks] == [2, 2]
    rounds = [(first[0], first[1] + second[1], first[2] + second[2]) for first, second in zip(*ranks, strict=True)]
    assert all(len(tasks) == 12 and tasks[4:8] == [tasks[4]] * 4 for _, tasks, _ in rounds)
    assert_trained_on_core_advantages(rounds)


def test_an_unreachable_app_trains_on_plain_grpo_on_the_apps_scale(tiny_model, tmp_path, monkeypatch):
    from gagar_client.grpo import grpo_values

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rounds = train(url="http://127.0.0.1:9", token="unused", model=tiny_model, output_dir=tmp_path,
                   prompts_per_step=2)

    mixed = 0
    for _, tasks, advantages in rounds:
        # Each completion's test verdict, read back from the sign of its advantage: a group's
        # passing ones sit above its mean.
        passed = [1.0 if a > 0 else 0.0 for a in advantages]
        keys = [(f"{task}#{i // GENERATIONS}", f"r{i % GENERATIONS}") for i, task in enumerate(tasks)]
        np.testing.assert_allclose(advantages, grpo_values(passed, keys), rtol=0, atol=1e-5)
        mixed += sum(0 < sum(passed[i:i + GENERATIONS]) < GENERATIONS for i in range(0, len(passed), GENERATIONS))
    assert mixed, "no group mixed passing and failing completions: nothing was tested"


@pytest.mark.django_db(transaction=True)
def test_a_step_not_graded_by_the_deadline_gets_the_apps_plain_grpo_and_counts_its_fallbacks(
        live_server, token, redis_broker):
    from types import SimpleNamespace

    from gagar_client import Client
    from gagar_client.trl import gagar_reward

    verdicts = {"task-0": [1.0, 0.0, 1.0, 0.0], "task-1": [1.0, 1.0, 1.0, 0.0]}
    tasks = [task for task in verdicts for _ in range(GENERATIONS)]
    completions = [f"attempt {i} at {task}" for i, task in enumerate(tasks)]
    metrics = {}
    with Client(live_server.url, token) as client:  # no worker: the groups stay queued past the 1 s deadline
        reward = gagar_reward(client, run="trl-late", test_reward=lambda **_: sum(verdicts.values(), []),
                              num_generations=GENERATIONS, deadline=1.0)
        values = reward(prompts=[f"Fix {task}." for task in tasks], completions=completions,
                        completion_ids=[[i] for i in range(len(tasks))], trainer_state=SimpleNamespace(global_step=0),
                        log_metric=metrics.__setitem__, task_id=tasks)

    expected = core_advantages("trl-late/step-0")
    keys = sorted(expected)  # per group, r1..r4 in completion order
    np.testing.assert_allclose(values, [expected[key][1] for key in keys], rtol=0, atol=1e-6)
    assert abs(values[0]) > 0.8  # std-normalised: a raw verdict minus its mean would be 0.5
    assert metrics == {"gagar/fallback_groups": 2.0}


def test_it_refuses_a_batch_that_does_not_split_into_its_groups():
    from gagar_client.steps import Sample
    from gagar_client.trl import step_records

    sample = Sample(reward=1.0, patch="", messages=[])
    batch = [("task-0", "p", sample)] * 4 + [("task-1", "q", sample)] * 4
    with pytest.raises(ValueError, match=r"completions 0\.\.7 are of the tasks \['task-0', 'task-1'\]"):
        step_records(batch, num_generations=8, pass_threshold=1.0)
    with pytest.raises(ValueError, match=r"completions 3\.\.5 are of the tasks \['task-0', 'task-1'\]"):
        step_records(batch, num_generations=3, pass_threshold=1.0)


def test_a_group_split_across_calls_is_refused_and_named_before_anything_is_sent():
    from types import SimpleNamespace

    from gagar_client import Client
    from gagar_client.trl import gagar_reward

    tasks = ["task-0"] * GENERATIONS + ["task-1"] * (GENERATIONS - 1)  # task-1's last completion is elsewhere
    with Client("http://127.0.0.1:9", "unused") as client:  # nothing may be sent: an unreachable app would not raise
        reward = gagar_reward(client, run="trl-split", test_reward=lambda completions, **_: [1.0] * len(completions),
                              num_generations=GENERATIONS)
        with pytest.raises(ValueError, match=r"completions 4\.\.6: group 'task-1' has 3 responses where "
                                             r"num_generations is 4 \(part of a group split across calls"):
            reward(prompts=[f"Fix {task}." for task in tasks], completions=[f"attempt {i}" for i in range(len(tasks))],
                   completion_ids=[[i] for i in range(len(tasks))], trainer_state=SimpleNamespace(global_step=0),
                   task_id=tasks)


def test_groups_of_the_same_task_in_one_step_get_names_of_their_own():
    from gagar_client.steps import Sample
    from gagar_client.trl import step_records

    batch = [("task-0", "p", Sample(reward=float(i % 2), patch=f"p{i}", messages=[])) for i in range(8)]
    records = step_records(batch, num_generations=4, pass_threshold=1.0)
    names = [r["group_id"] for r in records]
    assert len(set(names[:4])) == len(set(names[4:])) == 1 and names[0] != names[4]
    assert all(name.startswith("task-0:") for name in names)
    assert [r["trajectory_id"] for r in records[:4]] == ["r1", "r2", "r3", "r4"]
    assert [r["passed"] for r in records[:4]] == [False, True, False, True]
    assert records == step_records(batch, num_generations=4, pass_threshold=1.0)  # a retry sends the same
