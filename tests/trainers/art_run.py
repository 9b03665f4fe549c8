"""examples/art_score_group.py's gathering and ART's advantages, round after round in one process,
run in .venv-verl by tests/trainers/test_art.py:

    .venv-verl/bin/python tests/trainers/art_run.py job.json

The job (JSON): `tokenizer`; `rounds`, each a list of samples as the example takes them,
gathered one after the other (so the rounds are consecutive steps of the run); `options`,
`gagar_score_group`'s; and `take` (optional): before round `take["round"]`, the name that the
group of task `take["task"]` will have in app step `take["step"]` is taken in that step by
another writer, as the app refuses a group whose name is taken. Prints JSON:
per round, each sample's reward after scoring, ART's advantage (null where ART drops a zero
one), the distinct per-token advantages of the packed batch, and ART's own default GRPO
advantage of each sample's test verdict (`art_grpo`), what GAGAR redistributes.
"""

import asyncio
import itertools
import json
import os
import sys
from pathlib import Path

import art
from art.preprocessing.tokenize import tokenize_trajectory_groups
from gagar_client import Client
from gagar_client.steps import Sample, group_records
from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from art_score_group import rollout, score_step  # noqa: E402


async def take_name(samples: list[dict], *, task: str, step: int, options: dict) -> None:
    """Grade, as another writer, groups in step `step` under each name the task's group may have
    there: ART orders a group's trajectories as they finish and scores groups as they finish,
    so the group's name may be that of any order of its trajectories, at any place in the request."""
    trajectories = [await rollout(s) for s in samples if s["index"] == task]
    mine = [Sample(reward=t.reward, patch=t.messages()[-1]["content"], messages=t.messages()) for t in trajectories]
    names = {group_records(task, list(order), position=position, statement=None, pass_threshold=1.0)[0]["group_id"]
             for order in itertools.permutations(mine) for position in range(len({s["index"] for s in samples}))}
    with Client(options["url"], os.environ["GAGAR_TOKEN"]) as app:
        app.grade_step([{"group_id": name, "trajectory_id": "r1", "reward": 0.5, "patch": "another"} for name in names],
                       run=options["run"], step=step, deadline=0)


async def art_default_grpo(samples: list[dict], tokenizer) -> list[float | None]:
    """ART's own GRPO advantage of each sample's test verdict, without GAGAR: its default,
    `scale_rewards=True` (None where ART drops a zero one)."""
    tasks = list(dict.fromkeys(s["index"] for s in samples))
    groups = [art.TrajectoryGroup([await rollout(s) for s in samples if s["index"] == task]) for task in tasks]
    results = tokenize_trajectory_groups(tokenizer, groups, allow_training_without_logprobs=True, scale_rewards=True,
                                         shuffle_group_trajectories=False)
    advantages = {r.trajectory.messages()[-1]["content"]: r.advantage for r in results}
    return [advantages.get(s["response"]) for s in samples]


async def rounds(job: dict, tokenizer) -> list[dict]:
    take = job.get("take")
    out = []
    for number, samples in enumerate(job["rounds"]):
        if take and take["round"] == number:
            await take_name(samples, task=take["task"], step=take["step"], options=job["options"])
        out.append({**await score_step(samples, tokenizer, **job["options"]),
                    "art_grpo": await art_default_grpo(samples, tokenizer)})
    return out


def main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    tokenizer = AutoTokenizer.from_pretrained(job["tokenizer"], local_files_only=True)
    json.dump(asyncio.run(rounds(job, tokenizer)), sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
