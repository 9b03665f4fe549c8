"""The running app a trainer talks to (live server, real worker, Redis), the tiny model, and
the core's advantages on the rankings the worker wrote.

App modules are imported inside the fixtures (see tests/conftest.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers.conftest import redis_broker, workers  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A local random-weight model folder: nothing is downloaded."""
    from grading.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def token(researcher):
    """An API token of a researcher, who may submit steps."""
    from webapp.api.services import api_token_create

    return api_token_create(user=researcher, name="trainer")[1]


@pytest.fixture
def worker(redis_broker, workers):  # noqa: F811
    """One real Celery worker on the test database and a Redis broker of this test's own."""
    return workers(redis_broker)


@pytest.fixture
def start_reward_server(live_server, token, tmp_path):
    """Starts `python -m gagar_client.reward_server` against the live app on a free port, with
    the given options (`group_size=4` gives `--group-size 4`), and returns its URL. Its log
    is tmp_path/server.log."""
    started = []

    def start(**options) -> str:
        args = [sys.executable, "-m", "gagar_client.reward_server", "--app-url", live_server.url, "--port", "0"]
        for name, value in options.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        log = (tmp_path / "server.log").open("w")
        server = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "GAGAR_TOKEN": token}, stdout=subprocess.PIPE,
                                  stderr=log, text=True)
        started.append(server)
        line = server.stdout.readline()
        assert line.startswith("GAGAR reward server"), (tmp_path / "server.log").read_text()
        return line.split()[-1]

    yield start
    for server in started:
        server.terminate()
        server.wait(timeout=10)


def core_advantages(batch_name: str) -> dict[tuple[str, str], tuple[float, float]]:
    """(group_id, trajectory_id) -> (GAGAR advantage, plain GRPO advantage) of a step's batch,
    computed by `grading.advantages` on the rankings its gradings wrote and its stored config."""
    import numpy as np

    from grading.advantages import gagar_advantages
    from grading.rankings import ranks_from_tiers
    from webapp.models import Batch, Grading, Trajectory

    batch = Batch.objects.get(name=batch_name)
    config = batch.advantage_config
    done = Grading.objects.filter(group__batch=batch, status=Grading.Status.DONE)
    tiers = dict(done.values_list("group__group_id", "tiers"))
    flags = dict(done.values_list("group__group_id", "flags"))
    rows = list(Trajectory.objects.filter(batch=batch).order_by("group__group_id", "trajectory_id")
                .values_list("group__group_id", "trajectory_id", "reward", "passed"))
    groups = sorted({group for group, *_ in rows})
    ranks = [ranks_from_tiers(tiers[group]).get(trajectory, 0) if group in tiers else 0
             for group, trajectory, *_ in rows]
    capped = set(config["flag_names"]) if config.get("w_flag") is not None else set()
    flagged = np.array([rank > 0 and bool(capped.intersection(flags[group].get(trajectory, ())))
                        for (group, trajectory, *_), rank in zip(rows, ranks, strict=True)])
    result = gagar_advantages(
        np.array([r[2] for r in rows]), np.array([groups.index(r[0]) for r in rows]),
        np.array([r[3] for r in rows]), np.array(ranks), schedule=config["schedule"], params=config["params"],
        flagged=flagged if flagged.any() else None, w_flag=config.get("w_flag"),
        norm_by_std=config["norm_by_std"], unbiased_std=config["unbiased_std"])
    return {(group, trajectory): (float(a), float(g))
            for (group, trajectory, *_), a, g in zip(rows, result.advantages, result.grpo, strict=True)}
