"""GRPO with TRL on GAGAR rewards from a running GAGAR Studio (docs/training.md).

    .venv/bin/python manage.py make_tiny_model var/models/tiny
    GAGAR_TOKEN=... .venv/bin/python examples/trl_grpo.py --url http://127.0.0.1:8000 --model var/models/tiny

The app grades each step's groups (a worker must run: `make demo` starts one); the token is
one made on the app's API tokens page by a researcher. The tiny model writes nonsense, so
the "tests" here are a stand-in verdict and the "patch" a diff made of the completion: put
your sandbox's test run and the agent's final patch in their place.
"""

import argparse
import os
from pathlib import Path

from gagar_client import Client
from gagar_client.trl import gagar_reward

GENERATIONS = 4


def tests_pass(prompts, completions, completion_ids, **columns) -> list[float]:
    """Stand-in test verdict, 1.0 pass / 0.0 fail: replace it with running the task's tests."""
    return [0.0 if sum(ids) % 3 == 0 else 1.0 for ids in completion_ids]


def patch_adding(completion: str, row: dict) -> str:
    """Stand-in final patch: a diff adding a line per word of the completion."""
    words = completion.split() or ["pass"]
    added = "".join(f"+    step_{i} = {len(word)}\n" for i, word in enumerate(words))
    name = f"pkg/{row['task_id']}.py"
    hunk = f"@@ -1,1 +1,{len(words) + 1} @@\n def f():\n{added}"
    return f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n{hunk}"


def build_trainer(client: Client, *, run: str, model: Path, output_dir: Path, steps: int, prompts_per_step: int,
                  processes: int = 1, trainer_class=None):
    """A GRPOTrainer whose reward is GAGAR's advantage: `scale_rewards="none"` (and no KL term)
    so that TRL's advantage, the reward minus its group's mean, is that advantage unchanged."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_dict({"prompt": [f"Fix task {i}: the total is off by one." for i in range(8)],
                                 "task_id": [f"task-{i}" for i in range(8)]})
    config = GRPOConfig(output_dir=str(output_dir),
                        per_device_train_batch_size=prompts_per_step * GENERATIONS // processes,
                        num_generations=GENERATIONS, scale_rewards="none", beta=0.0,
                        max_completion_length=24, max_steps=steps, learning_rate=1e-3, use_cpu=True, seed=0,
                        report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True)
    return (trainer_class or GRPOTrainer)(
        model=AutoModelForCausalLM.from_pretrained(model, local_files_only=True),
        processing_class=AutoTokenizer.from_pretrained(model, local_files_only=True),
        reward_funcs=[gagar_reward(client, run=run, test_reward=tests_pass, num_generations=GENERATIONS,
                                   task_column="task_id", patch_of=patch_adding, grader="heuristic", deadline=60.0)],
        args=config, train_dataset=dataset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", type=Path, required=True, help="a local model folder")
    parser.add_argument("--run", default="trl-example")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--output-dir", type=Path, default=Path("var/trl-example"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with Client(args.url, os.environ["GAGAR_TOKEN"]) as client:
        build_trainer(client, run=args.run, model=args.model, output_dir=args.output_dir, steps=args.steps,
                      prompts_per_step=2).train()


if __name__ == "__main__":
    main()
