"""examples/verifiers_rubric.py's scoring, round after round in one process, run in .venv-verl by
tests/trainers/test_verifiers.py:

    .venv-verl/bin/python tests/trainers/verifiers_run.py job.json

The job (JSON): `rounds`, each a list of samples as the example takes them, scored one after
the other by one rubric (so the rounds are consecutive steps of its run); `options`, the
rubric's; and `take` (optional): before round `take["round"]`, the name that the group of
example `take["example"]` will have at position 0 of app step `take["step"]` is taken in that
step by another writer, as the app refuses a group whose name is taken. Prints JSON: each
round's rewards and advantages as verifiers set them.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

from gagar_client import Client
from gagar_client.steps import Sample, group_records
from gagar_client.verifiers import gagar_rubric

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from verifiers_rubric import rollout_states, score_step, tests_pass  # noqa: E402


def take_name(samples: list[dict], *, example: str, step: int, options: dict) -> None:
    """Grade, as another writer, a group in step `step` under the name the example's group will have."""
    states = rollout_states(samples)[example]
    mine = [Sample(reward=tests_pass(s["completion"], s["answer"]), patch=s["completion"][-1]["content"],
                   messages=s["prompt"] + s["completion"]) for s in states]
    name = group_records(str(states[0]["example_id"]), mine, position=0, statement=None,
                         pass_threshold=1.0)[0]["group_id"]
    with Client(options["url"], os.environ["GAGAR_TOKEN"]) as app:
        app.grade_step([{"group_id": name, "trajectory_id": "r1", "reward": 0.5, "patch": "another"}],
                       run=options["run"], step=step, deadline=0)


async def rounds(job: dict) -> list[list[dict]]:
    rubric = gagar_rubric(test_reward=tests_pass, **job["options"])
    take = job.get("take")
    out = []
    for number, samples in enumerate(job["rounds"]):
        if take and take["round"] == number:
            take_name(samples, example=take["example"], step=take["step"], options=job["options"])
        out.append(await score_step(samples, rubric))
    return out


def main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    json.dump(asyncio.run(rounds(job)), sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
