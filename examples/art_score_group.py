"""Score one step's groups with GAGAR in ART's own gathering and advantage code (docs/training.md).

    GAGAR_TOKEN=... LITELLM_LOCAL_MODEL_COST_MAP=True \\
        .venv-verl/bin/python examples/art_score_group.py examples/verl_step.json [key=value ...]

The step (JSON: `tokenizer`, a local tokenizer folder, and `samples` of `index`, `prompt`,
`response`, `ground_truth`) becomes one `art.TrajectoryGroup` per prompt, each trajectory's
reward its test verdict and `metadata["task_id"]` its prompt's `index`.
`art.gather_trajectory_groups` gathers them with `after_each=gagar_score_group`, as an ART
training loop does, then ART's `tokenize_trajectory_groups` (with `scale_rewards=False`,
as `backend.train(..., scale_rewards=False)` passes it) and `packed_tensors_from_tokenized_results`
turn the rewards into the advantages its trainer optimises. `key=value` arguments override
`gagar_score_group`'s options (`url`, `run`, `group_size`, `deadline`, ...). Prints, per
sample, its reward after scoring and ART's advantage (null where ART drops a zero
advantage), and the distinct per-token advantages of the packed batch, as JSON.
LITELLM_LOCAL_MODEL_COST_MAP keeps `import art` (litellm) from fetching a price list.
"""

import asyncio
import functools
import json
import sys

import art
import torch
import yaml
from art.preprocessing.pack import packed_tensors_from_tokenized_results
from art.preprocessing.tokenize import tokenize_trajectory_groups
from gagar_client.art import gagar_score_group
from transformers import AutoTokenizer

OPTIONS = {"url": "http://127.0.0.1:8000", "run": "art-example", "group_size": 4, "grader": "heuristic",
           "deadline": 60}


def tests_pass(response: str, ground_truth: str) -> float:
    """The example's test verdict: the response holds the fix. Put your sandbox's test run in its place."""
    return 1.0 if ground_truth in response else 0.0


async def rollout(sample: dict) -> art.Trajectory:
    """A trajectory as an ART rollout returns it: its messages, its test verdict as reward."""
    return art.Trajectory(messages_and_choices=[{"role": "user", "content": sample["prompt"]},
                                                {"role": "assistant", "content": sample["response"]}],
                          reward=tests_pass(sample["response"], sample["ground_truth"]),
                          metadata={"task_id": sample["index"]})


async def scored_groups(samples: list[dict], **options) -> list[art.TrajectoryGroup]:
    """Each prompt's group, gathered and scored by ART with `gagar_score_group` as `after_each`."""
    tasks = list(dict.fromkeys(s["index"] for s in samples))
    return await art.gather_trajectory_groups(
        (art.TrajectoryGroup(rollout(s) for s in samples if s["index"] == task) for task in tasks),
        pbar_desc=None, after_each=functools.partial(gagar_score_group, **options))


def art_advantages(groups: list[art.TrajectoryGroup], tokenizer) -> tuple[dict[int, float], list[float]]:
    """ART's advantage of each trajectory (by id(); absent where ART drops a zero one), and the
    distinct per-token advantages of the packed batch the trainer gets (none when every
    advantage is zero: ART then skips the step)."""
    results = list(tokenize_trajectory_groups(tokenizer, groups, allow_training_without_logprobs=True,
                                              scale_rewards=False, shuffle_group_trajectories=False))
    if not results:
        return {}, []
    packed = packed_tensors_from_tokenized_results(results, seq_len=max(len(r.token_ids) for r in results))
    tokens = packed["advantages"][packed["assistant_mask"]]
    return {id(r.trajectory): r.advantage for r in results}, torch.unique(tokens).tolist()


async def score_step(samples: list[dict], tokenizer, **options) -> dict:
    """Each sample's reward after scoring and ART's advantage (None where ART drops a zero one),
    in the samples' order, and the distinct per-token advantages of the packed batch."""
    groups = await scored_groups(samples, **options)
    advantages, packed = art_advantages(groups, tokenizer)
    by_response = {t.messages()[-1]["content"]: t for group in groups for t in group.trajectories}
    trajectories = [by_response[s["response"]] for s in samples]
    return {"rewards": [t.reward for t in trajectories], "advantages": [advantages.get(id(t)) for t in trajectories],
            "packed": packed}


def main(step_path: str, *overrides: str) -> None:
    with open(step_path) as f:
        step = json.load(f)
    options = dict(OPTIONS)
    for override in overrides:
        key, _, value = override.partition("=")
        options[key] = yaml.safe_load(value)
    tokenizer = AutoTokenizer.from_pretrained(step["tokenizer"], local_files_only=True)
    json.dump(asyncio.run(score_step(step["samples"], tokenizer, **options)), sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
