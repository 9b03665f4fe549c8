"""ART's own gathering (`after_each`) and advantage code on `gagar_client.art.gagar_score_group`,
against the running app.

ART 0.5.18 is installed in .venv-verl without its dependencies (`make install-verl`);
tests/trainers/art_run.py runs examples/art_score_group.py there on test_verl.py's step
(three groups of four): `art.gather_trajectory_groups` scores each group with
`gagar_score_group`, then ART's `tokenize_trajectory_groups` (`scale_rewards=False`) and
`packed_tensors_from_tokenized_results` compute what its trainer optimises. Each
trajectory's reward and ART's advantage must be the core's GAGAR advantage on the worker's
ranking, the passing ones summing to what ART's own default GRPO gives them. A group the app
does not rank (late, unreachable, refusing it) gets its plain GRPO advantage on ART's scale,
never its test score; a group split across calls is not graded.
"""

import json
import os
import subprocess

import numpy as np
import pytest

from tests.trainers.test_verl import GROUPS, ROOT, VERL_PYTHON, step_samples
from tests.trainers.test_verl_grouped import by_patch

SCRIPT = ROOT / "tests" / "trainers" / "art_run.py"
RUN = "art-run"

pytestmark = pytest.mark.django_db(transaction=True)


def run_art(rounds, *, tmp_path, token, tokenizer, take=None, fails=False, **options) -> tuple[list[dict], str]:
    """art_run.py's rounds and its log (stderr); with `fails`, None and the log of its failure."""
    assert VERL_PYTHON.exists(), "no .venv-verl: build it with `make install-verl`"
    job = {"tokenizer": str(tokenizer), "rounds": rounds, "options": {"run": RUN, "group_size": 4, **options},
           "take": take}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env.update(GAGAR_TOKEN=token, HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run([str(VERL_PYTHON), str(SCRIPT), str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert (done.returncode != 0) == fails, done.stderr[-4000:]
    return (None if fails else json.loads(done.stdout)), done.stderr


def plain_grpo(samples) -> np.ndarray:
    """The app's plain GRPO of each sample's test verdict on ART's scale: population std."""
    from grading.advantages import grpo_advantages

    tasks = sorted(GROUPS)
    return grpo_advantages(np.array([1.0 if "FIXED" in s["response"] else 0.0 for s in samples]),
                           np.array([tasks.index(s["index"]) for s in samples]), unbiased_std=False)


def assert_art_trains_on(out, values):
    """ART's advantages are `values` (a zero one dropped), and its packed batch holds them all
    divided by one number."""
    values = np.asarray(values)
    kept = [a is not None for a in out["advantages"]]
    assert not values[~np.array(kept)].any()
    np.testing.assert_allclose([a for a in out["advantages"] if a is not None], values[kept], rtol=0, atol=1e-9)
    distinct = np.unique(np.round(values[kept], 6))
    packed = np.array(out["packed"])
    assert len(packed) == len(distinct)
    np.testing.assert_allclose(packed / packed.max(), distinct / distinct.max(), rtol=1e-5)


def test_art_trains_on_the_cores_advantages_with_arts_own_grpo_passing_sums(
        live_server, token, worker, tiny_model, tmp_path):
    samples = step_samples()
    [out], log = run_art([samples], tmp_path=tmp_path, token=token, tokenizer=tiny_model, url=live_server.url)

    expected = by_patch(f"{RUN}/step-0")  # ART orders a group's trajectories as they finish
    gagar = np.array([expected[(s["index"], s["response"])][0] for s in samples])
    grpo = np.array([expected[(s["index"], s["response"])][1] for s in samples])
    np.testing.assert_allclose(out["rewards"], gagar, rtol=0, atol=1e-9)
    assert_art_trains_on(out, gagar)
    art_grpo = np.array([a or 0.0 for a in out["art_grpo"]])  # ART's own advantage of the test verdicts
    np.testing.assert_allclose(grpo, art_grpo, rtol=0, atol=1e-9)
    passed = np.array(["FIXED" in s["response"] for s in samples])
    for task in GROUPS:  # each group's passing trajectories keep the sum ART's GRPO gives them
        mine = passed & np.array([s["index"] == task for s in samples])
        assert gagar[mine].sum() == pytest.approx(art_grpo[mine].sum(), abs=1e-9)
    assert np.abs(gagar - grpo).max() > 0.1, "the grader's rankings moved no credit: nothing was tested"
    assert "plain GRPO" not in log


def test_a_late_step_gets_plain_grpo_on_arts_scale(live_server, token, redis_broker, tiny_model, tmp_path):
    samples = step_samples()  # no worker: the mixed groups stay queued past the 1 s deadline
    [out], log = run_art([samples], tmp_path=tmp_path, token=token, tokenizer=tiny_model, url=live_server.url,
                         deadline=1)

    np.testing.assert_allclose(out["rewards"], plain_grpo(samples), rtol=0, atol=1e-9)
    assert_art_trains_on(out, plain_grpo(samples))
    assert log.count("gets its plain GRPO advantages (timeout") == 2  # task-a and task-c; task-b is not mixed


def test_an_unreachable_app_gives_plain_grpo_on_arts_scale(token, tiny_model, tmp_path):
    samples = step_samples()
    [out], log = run_art([samples], tmp_path=tmp_path, token=token, tokenizer=tiny_model, url="http://127.0.0.1:9",
                         deadline=1)

    np.testing.assert_allclose(out["rewards"], plain_grpo(samples), rtol=0, atol=1e-9)
    assert_art_trains_on(out, plain_grpo(samples))
    assert log.count("gets its plain GRPO advantages (app unreachable") == 3


def test_a_group_the_app_refuses_gets_plain_grpo_beside_the_others(live_server, token, redis_broker, tiny_model,
                                                                  tmp_path):
    samples = step_samples()  # no worker: task-c is not graded by the 2 s deadline
    first = [s for s in samples if s["index"] == "task-b"]  # the run's step 0: the next round is its step 1
    second = [s for s in samples if s["index"] != "task-b"]
    (_, out), log = run_art([first, second], tmp_path=tmp_path, token=token, tokenizer=tiny_model,
                            url=live_server.url, deadline=2, take={"round": 1, "task": "task-a", "step": 1})

    np.testing.assert_allclose(out["rewards"], plain_grpo(second), rtol=0, atol=1e-9)
    assert f"GAGAR {RUN}: group 'task-a' is not graded, the app refused it: " in log
    assert f"GAGAR {RUN} step 1: group task-c:" in log and "gets its plain GRPO advantages (timeout" in log


def test_a_group_split_across_calls_stops_the_gathering_and_is_not_graded(live_server, token, redis_broker,
                                                                         tiny_model, tmp_path):
    from webapp.models import Group

    samples = step_samples()
    samples.remove(next(s for s in samples if s["index"] == "task-c"))  # task-c's group comes split: 3 of 4
    _, log = run_art([samples], tmp_path=tmp_path, token=token, tokenizer=tiny_model, url=live_server.url,
                     fails=True)

    assert "ValueError: gagar_client.art: group 'task-c' has 3 responses where group_size is 4 (part of a group " \
           "split across calls" in log
    assert not Group.objects.filter(batch__name__startswith=f"{RUN}/", group_id__startswith="task-c").exists()
