"""The client's fallback (gagar_client.grpo) gives what the app's plain GRPO gives: the same
defaults, and the same values as grading.advantages on random steps, layouts and configs. (The
same step through the live app and with the app down: tests/webapp/api/test_runs.py.)"""

import inspect
import random
from dataclasses import fields

import numpy as np
import pytest
from gagar_client.grpo import DEFAULTS, grpo_values

from grading.advantages import grpo_advantages
from webapp.advantages.config import DEFAULT_CONFIG, AdvantageConfig


def test_the_client_reads_the_config_fields_plain_grpo_takes_with_the_apps_defaults():
    """The client's list of fields is the app's: those of AdvantageConfig that grpo_advantages
    takes, each with DEFAULT_CONFIG's value."""
    taken = set(inspect.signature(grpo_advantages).parameters) & {f.name for f in fields(AdvantageConfig)}
    assert taken
    assert DEFAULTS == {name: getattr(DEFAULT_CONFIG, name) for name in taken}


@pytest.mark.parametrize("seed", range(20))
def test_random_steps_get_the_apps_values(seed):
    rng = random.Random(seed)
    keys, rewards = [], []
    for g in range(rng.randint(1, 12)):
        for t in rng.sample(range(40), rng.randint(1, 16)):  # ids out of order, a singleton now and then
            keys.append((f"g{g}", f"t{t}"))
            rewards.append(rng.choice([0.0, 1.0, round(rng.random(), 3)]))
    order = list(range(len(keys)))
    rng.shuffle(order)  # records in any order: the app sorts a group's trajectories by id
    keys, rewards = [keys[i] for i in order], [rewards[i] for i in order]
    config = rng.choice([None, {"norm_by_std": False}, {"unbiased_std": False}, {"schedule": "exponential"}])
    settings = {**DEFAULTS, **(config or {})}
    app_order = sorted(range(len(keys)), key=lambda i: keys[i])
    groups = {g: n for n, g in enumerate(sorted({g for g, _ in keys}))}
    app = grpo_advantages(np.array([rewards[i] for i in app_order]), np.array([groups[keys[i][0]] for i in app_order]),
                          norm_by_std=settings["norm_by_std"], unbiased_std=settings["unbiased_std"])
    expected = dict(zip([keys[i] for i in app_order], app.tolist(), strict=True))
    values = grpo_values(rewards, keys, config)
    assert values == pytest.approx([expected[k] for k in keys], abs=1e-12)
    lone = [k for k in keys if sum(g == k[0] for g, _ in keys) == 1]
    assert all(values[keys.index(k)] == 0.0 for k in lone)  # one trajectory carries no relative signal
