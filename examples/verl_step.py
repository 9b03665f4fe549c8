"""Score one verl training step with GAGAR and compute verl's advantages, with verl's own code.

    .venv-verl/bin/python examples/verl_step.py examples/verl_reward.yaml examples/verl_step.json [key=value ...]

The config (examples/verl_reward.yaml) is in verl's keys; `key=value` arguments override its
`reward_kwargs`. The step (JSON: `tokenizer`, a local tokenizer folder, and `samples` of
`index`, `prompt`, `response`, `ground_truth` in the batch's order) becomes the DataProto
verl's trainer holds after generation; verl's `BatchRewardManager` scores it by calling
`gagar_client.verl.compute_score`, and verl's `compute_grpo_outcome_advantage` turns the
token-level rewards into advantages as `algorithm.adv_estimator=grpo` does. Prints, per
sample, the score on its last response token and its advantage, as JSON. The API token is
read from the environment variable the config names (GAGAR_TOKEN).
"""

import json
import sys
import uuid

import numpy as np
import torch
import yaml
from gagar_client.verl import compute_score
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
from verl.workers.reward_manager.batch import BatchRewardManager


def tests_pass(data_source, solution_str, ground_truth, extra_info):
    """The example's test verdict: the response passes when it contains the ground truth's fix."""
    return {"score": 1.0 if ground_truth in solution_str else 0.0}


def padded(rows: list[list[int]], pad: int, *, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span] = torch.tensor(row)
        mask[i, span] = 1
    return ids, mask


def step_data(step: dict, tokenizer) -> DataProto:
    """The batch as verl's trainer holds it after generation: left-padded prompts, right-padded
    responses, each prompt's dataset fields and one uid per prompt."""
    samples = step["samples"]
    uid = {s["index"]: str(uuid.uuid4()) for s in samples}
    prompts, prompt_mask = padded([tokenizer.encode(s["prompt"]) for s in samples], tokenizer.pad_token_id,
                                  left=True)
    responses, response_mask = padded([tokenizer.encode(s["response"]) for s in samples], tokenizer.pad_token_id,
                                      left=False)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                 "attention_mask": torch.cat([prompt_mask, response_mask], 1), "response_mask": response_mask},
        non_tensors={
            "data_source": np.array(["gagar-example"] * len(samples), dtype=object),
            "reward_model": np.array([{"ground_truth": s["ground_truth"]} for s in samples], dtype=object),
            "extra_info": np.array([{"index": s["index"]} for s in samples], dtype=object),
            "uid": np.array([uid[s["index"]] for s in samples], dtype=object),
        },
    )


def main(config_path: str, step_path: str, *overrides: str) -> None:
    with open(config_path) as f:
        config = yaml.safe_load(f)
    with open(step_path) as f:
        step = json.load(f)
    algorithm = config["algorithm"]
    if algorithm["adv_estimator"] != "grpo" or algorithm["use_kl_in_reward"]:
        raise SystemExit("this example computes verl's grpo estimator without KL in the reward")
    reward_kwargs = dict(config["custom_reward_function"]["reward_kwargs"])
    for override in overrides:
        key, _, value = override.partition("=")
        reward_kwargs[key] = yaml.safe_load(value)

    tokenizer = AutoTokenizer.from_pretrained(step["tokenizer"], local_files_only=True)
    data = step_data(step, tokenizer)
    manager = BatchRewardManager(tokenizer, num_examine=0, compute_score=compute_score, **reward_kwargs)
    token_level_rewards = manager(data)
    response_mask = data.batch["response_mask"]
    advantages, _ = compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards, response_mask=response_mask, index=data.non_tensor_batch["uid"],
        norm_adv_by_std_in_grpo=algorithm["norm_adv_by_std_in_grpo"])
    rows = torch.arange(len(data))
    last = response_mask.sum(-1) - 1
    json.dump({"scores": token_level_rewards[rows, last].tolist(), "advantages": advantages[rows, last].tolist()},
              sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
