"""verifiers' own `Rubric.score_group` on `gagar_client.verifiers`' group reward function, against
the running app.

verifiers 0.3.1 is installed in .venv-verl without its dependencies (`make install-verl`);
tests/trainers/verifiers_run.py runs examples/verifiers_rubric.py there, scoring test_verl.py's
step (three groups of four, interleaved) with every group at once, as `Environment.generate`
does. The reward and the advantage verifiers set on each state must be the core's GAGAR
advantage on the worker's ranking, on verifiers' Dr. GRPO scale. A group the app does not
rank (late, unreachable, refusing it) gets its plain Dr. GRPO advantage, the reward minus its
group's mean, never its test score; a group split across calls is not graded.
"""

import json
import os
import subprocess

import numpy as np
import pytest

from tests.trainers.conftest import core_advantages
from tests.trainers.test_verl import ROOT, VERL_PYTHON, step_samples

SCRIPT = ROOT / "tests" / "trainers" / "verifiers_run.py"
RUN = "verifiers-run"

pytestmark = pytest.mark.django_db(transaction=True)


def run_verifiers(rounds, *, tmp_path, token, take=None, **options) -> tuple[list[list[dict]], str]:
    """verifiers_run.py's rounds and its log (stderr)."""
    assert VERL_PYTHON.exists(), "no .venv-verl: build it with `make install-verl`"
    job = {"rounds": rounds, "options": {"run": RUN, "group_size": 4, **options}, "take": take}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env["GAGAR_TOKEN"] = token
    done = subprocess.run([str(VERL_PYTHON), str(SCRIPT), str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout), done.stderr


def passes(sample) -> float:
    return 1.0 if "FIXED" in sample["response"] else 0.0


def dr_grpo(samples) -> np.ndarray:
    """verifiers' own advantage of the test verdicts: each minus its group's mean."""
    rewards = np.array([passes(s) for s in samples])
    means = {task: rewards[[s["index"] == task for s in samples]].mean() for task in {s["index"] for s in samples}}
    return rewards - np.array([means[s["index"]] for s in samples])


def keys_of(samples, batch_name) -> list[tuple[str, str]]:
    """Each sample's (group_id, trajectory_id): the group of its example (named by its example_id,
    the tasks' sorted position), r1.. in the samples' order."""
    expected = core_advantages(batch_name)
    examples = sorted({s["index"] for s in samples})
    group_of = {group.split(":")[0]: group for group, _ in expected}
    seen: dict[str, int] = {}
    keys = []
    for s in samples:
        seen[s["index"]] = seen.get(s["index"], 0) + 1
        keys.append((group_of[str(examples.index(s["index"]))], f"r{seen[s['index']]}"))
    return keys


def test_verifiers_trains_on_the_cores_advantages_on_its_own_scale(live_server, token, worker, tmp_path):
    from webapp.models import Batch

    samples = step_samples()
    [out], log = run_verifiers([samples], tmp_path=tmp_path, token=token, url=live_server.url)

    expected = core_advantages(f"{RUN}/step-0")
    keys = keys_of(samples, f"{RUN}/step-0")
    gagar = np.array([expected[key][0] for key in keys])
    grpo = np.array([expected[key][1] for key in keys])
    np.testing.assert_allclose([state["reward"] for state in out], gagar, rtol=0, atol=1e-9)
    np.testing.assert_allclose([state["advantage"] for state in out], gagar, rtol=0, atol=1e-9)
    np.testing.assert_allclose(grpo, dr_grpo(samples), rtol=0, atol=1e-9)  # the scale verifiers' GRPO gives
    passed = np.array([passes(s) for s in samples]) == 1
    for task in {s["index"] for s in samples}:  # each group's passing rollouts keep their Dr. GRPO sum
        mine = passed & np.array([s["index"] == task for s in samples])
        assert gagar[mine].sum() == pytest.approx(grpo[mine].sum(), abs=1e-9)
    assert np.abs(gagar - grpo).max() > 0.1, "the grader's rankings moved no credit: nothing was tested"
    assert list(Batch.objects.filter(name__startswith=f"{RUN}/").values_list("name", flat=True)) == [f"{RUN}/step-0"]
    assert "plain GRPO" not in log


def test_a_late_step_gets_plain_dr_grpo_and_a_split_group_is_not_graded(live_server, token, redis_broker, tmp_path):
    from webapp.models import Group

    samples = step_samples()  # no worker: the mixed groups stay queued past the 1 s deadline
    samples.remove(next(s for s in samples if s["index"] == "task-c"))  # task-c's group comes split: 3 of 4
    [out], log = run_verifiers([samples], tmp_path=tmp_path, token=token, url=live_server.url, deadline=1)

    whole = [i for i, s in enumerate(samples) if s["index"] != "task-c"]
    split = [i for i, s in enumerate(samples) if s["index"] == "task-c"]
    np.testing.assert_allclose([out[i]["reward"] for i in whole], dr_grpo(samples)[whole], rtol=0, atol=1e-9)
    # verifiers gives a group whose reward function raised 0.0 each, and logs the error.
    assert [(out[i]["reward"], out[i]["advantage"]) for i in split] == [(0.0, 0.0)] * 3
    assert "Error calling group reward function gagar: gagar_client.verifiers: group '2' has 3 responses where " \
           "group_size is 4 (part of a group split across calls" in log
    assert log.count("gets its plain GRPO advantages (timeout") == 1  # task-a; task-b is not mixed
    assert not Group.objects.filter(batch__name__startswith=f"{RUN}/", group_id__startswith="2:").exists()


def test_an_unreachable_app_gives_plain_dr_grpo(token, tmp_path):
    samples = step_samples()
    [out], log = run_verifiers([samples], tmp_path=tmp_path, token=token, url="http://127.0.0.1:9", deadline=1)

    np.testing.assert_allclose([state["advantage"] for state in out], dr_grpo(samples), rtol=0, atol=1e-9)
    np.testing.assert_allclose([state["reward"] for state in out], dr_grpo(samples), rtol=0, atol=1e-9)
    assert log.count("gets its plain GRPO advantages (app unreachable") == 3


def test_a_group_the_app_refuses_gets_plain_dr_grpo_beside_the_others(live_server, token, redis_broker, tmp_path):
    samples = step_samples()  # no worker: task-c is not graded by the 2 s deadline
    first = [s for s in samples if s["index"] == "task-b"]  # the run's step 0: the next round is its step 1
    second = [s for s in samples if s["index"] != "task-b"]
    (_, out), log = run_verifiers([first, second], tmp_path=tmp_path, token=token, url=live_server.url, deadline=2,
                                  take={"round": 1, "example": "task-a", "step": 1})

    np.testing.assert_allclose([state["reward"] for state in out], dr_grpo(second), rtol=0, atol=1e-9)
    assert f"GAGAR {RUN}: group '0' is not graded, the app refused it: " in log
    assert f"GAGAR {RUN} step 1: group 1:" in log and "gets its plain GRPO advantages (timeout" in log
