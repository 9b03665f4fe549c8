"""verl 0.9.1's reward loop, one response per call, on `gagar_client.grouped.compute_score`
against the running app.

tests/trainers/verl_grouped_run.py (in .venv-verl) builds verl's `RewardLoopWorker` with the
`naive` manager and scores every sample of a step in a task of its own, concurrently; the
groups are interleaved as in test_verl.py. Each score must be the advantage the core
computes from the worker's rankings, the same as the batch path's for the same step.
"""

import json
import os
import subprocess

import numpy as np
import pytest

from tests.trainers.conftest import core_advantages
from tests.trainers.test_verl import ROOT, VERL_PYTHON, step_samples

SCRIPT = ROOT / "tests" / "trainers" / "verl_grouped_run.py"
RUN = "verl-grouped"
REWARD_KWARGS = {"run": RUN, "test_score": "verl_step:tests_pass", "group_size": 4, "grader": "heuristic"}

pytestmark = pytest.mark.django_db(transaction=True)


def run_grouped(samples, *, tmp_path, url, token, tokenizer, batch_run=None, **reward_kwargs) -> tuple[dict, str]:
    """verl_grouped_run.py's output and its log (stderr)."""
    assert VERL_PYTHON.exists(), "no .venv-verl: build it with `make install-verl`"
    job = {"tokenizer": str(tokenizer), "samples": samples, "reward_kwargs": {**REWARD_KWARGS, "url": url,
                                                                              **reward_kwargs}}
    if batch_run:
        job["batch_kwargs"] = {"url": url, "run": batch_run, "test_score": "verl_step:tests_pass"}
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
    out, log = run_grouped(samples, tmp_path=tmp_path, url=live_server.url, token=token, tokenizer=tiny_model,
                           batch_run="verl-batch")

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
    from webapp.models import Group

    samples = step_samples()
    samples.remove(next(s for s in samples if s["index"] == "task-c"))  # a response scored elsewhere
    out, log = run_grouped(samples, tmp_path=tmp_path, url=live_server.url, token=token, tokenizer=tiny_model,
                           group_timeout=5)

    expected = by_patch(f"{RUN}/step-0")
    complete = [i for i, s in enumerate(samples) if s["index"] != "task-c"]
    incomplete = [i for i, s in enumerate(samples) if s["index"] == "task-c"]
    np.testing.assert_allclose([out["scores"][i] for i in complete],
                               [expected[(samples[i]["index"], samples[i]["response"])][0] for i in complete],
                               rtol=0, atol=1e-6)
    assert [out["scores"][i] for i in incomplete] == [1.0 if "FIXED" in samples[i]["response"] else 0.0
                                                      for i in incomplete]
    assert max(out["seconds"][i] for i in complete) < 5 <= min(out["seconds"][i] for i in incomplete)
    assert not Group.objects.filter(batch__name__startswith=f"{RUN}/", group_id__startswith="task-c").exists()
    assert "group task-c has 3 of 4 responses after 5 s; they keep their test scores" in log
