"""verl's own reward manager and GRPO estimator on the rewards `gagar_client.verl.compute_score`
gets from the running app.

verl 0.9.1 pins transformers<5.11, so it runs in .venv-verl (`make install-verl`): the
example examples/verl_step.py, run there on examples/verl_reward.yaml, scores a step with
verl's `BatchRewardManager` and computes verl's `compute_grpo_outcome_advantage` with
`norm_adv_by_std_in_grpo=False`; here the app grades with the heuristic grader in a real
worker, and the advantages verl computed must equal `grading.advantages` on the rankings
the worker wrote.
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.trainers.conftest import core_advantages

ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = ROOT / ".venv-verl" / "bin" / "python"
EXAMPLE = ROOT / "examples" / "verl_step.py"
CONFIG = ROOT / "examples" / "verl_reward.yaml"
RUN = "verl-run"

# Per prompt: each response fixes the bug or not, and how many lines its patch adds. Mixed
# groups with passing patches of different sizes, which the heuristic grader ranks apart,
# and one all-pass group, which is not graded.
GROUPS = {
    "task-a": [(True, 3), (True, 40), (False, 2), (True, 12)],
    "task-b": [(True, 5), (True, 6), (True, 30), (True, 8)],
    "task-c": [(False, 4), (True, 2), (True, 25), (False, 9)],
}
# The batch as verl's trainer holds it after balancing across ranks: groups interleaved.
ORDER = [5, 0, 9, 2, 11, 7, 1, 4, 10, 3, 8, 6]

pytestmark = pytest.mark.django_db(transaction=True)


def patch(fixed: bool, lines: int) -> str:
    added = "".join(f"+    total += part_{i}  # {'FIXED' if fixed and i == 0 else 'tried'}\n" for i in range(lines))
    return (f"diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
            f"@@ -1,2 +1,{lines + 2} @@\n def f(parts):\n{added}     return total\n")


def step_samples() -> list[dict]:
    samples = [{"index": task, "prompt": f"Fix {task}: the total is wrong.", "response": patch(fixed, lines),
                "ground_truth": "FIXED"}
               for task, responses in GROUPS.items() for fixed, lines in responses]
    return [samples[i] for i in ORDER]


def run_verl(samples, *, tmp_path, url, token, tokenizer, deadline=60.0) -> tuple[dict, str]:
    """examples/verl_step.py's output on examples/verl_reward.yaml, and its log (stderr)."""
    assert VERL_PYTHON.exists(), "no .venv-verl: build it with `make install-verl`"
    step = tmp_path / "step.json"
    step.write_text(json.dumps({"tokenizer": str(tokenizer), "samples": samples}))
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env.update(GAGAR_TOKEN=token, HF_HUB_OFFLINE="1")
    done = subprocess.run([str(VERL_PYTHON), str(EXAMPLE), str(CONFIG), str(step), f"url={url}", f"run={RUN}",
                           f"deadline={deadline}"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout), done.stderr


def keys_in_batch_order(samples, batch_name) -> list[tuple[str, str]]:
    """The (group_id, trajectory_id) of each sample: its prompt's group, r1.. in batch order."""
    from webapp.models import Group

    group_of = {g.split(":")[0]: g for g in Group.objects.filter(batch__name=batch_name)
                .values_list("group_id", flat=True)}
    seen: dict[str, int] = {}
    keys = []
    for sample in samples:
        seen[sample["index"]] = seen.get(sample["index"], 0) + 1
        keys.append((group_of[sample["index"]], f"r{seen[sample['index']]}"))
    return keys


def test_verl_trains_on_the_advantages_the_core_computes_from_the_workers_rankings(
        live_server, token, worker, tiny_model, tmp_path):
    samples = step_samples()
    out, log = run_verl(samples, tmp_path=tmp_path, url=live_server.url, token=token, tokenizer=tiny_model)

    expected = core_advantages(f"{RUN}/step-0")
    keys = keys_in_batch_order(samples, f"{RUN}/step-0")
    gagar = np.array([expected[key][0] for key in keys])
    grpo = np.array([expected[key][1] for key in keys])
    np.testing.assert_allclose(out["scores"], gagar, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out["advantages"], gagar, rtol=0, atol=1e-6)
    assert np.abs(gagar - grpo).max() > 0.1, "the grader's rankings moved no credit: nothing was tested"
    assert "gets its plain GRPO advantages" not in log


def test_a_step_not_graded_by_the_deadline_trains_on_plain_grpo_and_says_so(live_server, token, redis_broker,
                                                                             tiny_model, tmp_path):
    samples = step_samples()  # no worker: the mixed groups stay queued
    out, log = run_verl(samples, tmp_path=tmp_path, url=live_server.url, token=token, tokenizer=tiny_model,
                        deadline=1.0)

    expected = core_advantages(f"{RUN}/step-0")
    grpo = np.array([expected[key][1] for key in keys_in_batch_order(samples, f"{RUN}/step-0")])
    np.testing.assert_allclose(out["advantages"], grpo, rtol=0, atol=1e-6)
    assert log.count("gets its plain GRPO advantages (timeout") == 2  # task-a and task-c; task-b is not mixed


def test_an_unreachable_app_gives_plain_grpo_on_the_apps_scale_and_says_so(tiny_model, tmp_path):
    from grading.advantages import grpo_advantages

    samples = step_samples()
    out, log = run_verl(samples, tmp_path=tmp_path, url="http://127.0.0.1:9", token="unused", tokenizer=tiny_model,
                        deadline=1.0)

    scores = [1.0 if "FIXED" in s["response"] else 0.0 for s in samples]
    tasks = sorted(GROUPS)
    # What the app's plain GRPO gives under the step's default config (std-normalised), not the
    # raw scores: an outage's step keeps the scale of a graded one.
    grpo = grpo_advantages(np.array(scores), np.array([tasks.index(s["index"]) for s in samples]))
    np.testing.assert_allclose(out["scores"], grpo, rtol=0, atol=1e-6)  # verl keeps scores as float32
    np.testing.assert_allclose(out["advantages"], grpo, rtol=0, atol=1e-6)
    assert log.count("gets its plain GRPO advantages (app unreachable") == 3


def test_a_group_split_across_calls_keeps_its_test_scores_and_is_named(tiny_model, tmp_path):
    samples = step_samples()
    samples.remove(next(s for s in samples if s["index"] == "task-c"))  # task-c's last response is elsewhere
    out, log = run_verl(samples, tmp_path=tmp_path, url="http://127.0.0.1:9", token="unused", tokenizer=tiny_model,
                        deadline=1.0)

    scores = np.array([1.0 if "FIXED" in s["response"] else 0.0 for s in samples])
    split = np.array([s["index"] == "task-c" for s in samples])
    np.testing.assert_allclose(np.array(out["scores"])[split], scores[split], rtol=0, atol=1e-6)
    # verl subtracts the group's mean: plain Dr. GRPO for the part it has
    np.testing.assert_allclose(np.array(out["advantages"])[split], scores[split] - scores[split].mean(), atol=1e-6)
    assert "group 'task-c' has 3 responses where group_size is 4 (part of a group split across calls" in log
    assert "it is not graded, its responses keep their test scores" in log
    assert log.count("gets its plain GRPO advantages (app unreachable") == 2  # task-a and task-b, whole
