"""verl 0.9.1's reward loop scoring one step with `gagar_client.grouped.compute_score`, run in
.venv-verl by tests/trainers/test_verl_grouped.py:

    .venv-verl/bin/python tests/trainers/verl_grouped_run.py job.json

The job (JSON): `tokenizer`, a local tokenizer folder; `samples` as examples/verl_step.py
takes them; `reward_kwargs`; `workers`, the indices of the samples each reward-loop worker
scores (default: one worker, all of them); and `batch_kwargs` to score the same step on the
batch path too.

verl's `RewardLoopWorker` is built from verl's own reward config (`reward/reward.yaml`) with
`reward.custom_reward_function` pointing at the grouped function, as a trainer's config
does; no Ray: the worker is the plain class Ray would wrap. Each worker runs in a thread
with an event loop of its own, as each Ray actor has, so no two share parked calls. Each
of its samples is scored by its `compute_score` in a task of its own, gathered, as
`compute_score_batch` does, and timed from when the worker is built. Prints JSON: each
sample's score and the seconds it took, when the (first) worker was built (`started_at`,
time.time(), to set against the app's records), and the batch path's scores.
"""

import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import verl
from gagar_client.verl import compute_score as batch_compute_score
from omegaconf import OmegaConf
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.workers.reward_manager.batch import BatchRewardManager

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from verl_step import step_data  # noqa: E402

REWARD_CONFIG = Path(verl.__file__).parent / "trainer" / "config" / "reward" / "reward.yaml"


def grouped_scores(job: dict) -> tuple[list[float], list[float], float]:
    """Each sample's score from the reward loop, the seconds its worker waited for it, and when
    the first worker started (time.time())."""
    workers = job.get("workers", [list(range(len(job["samples"])))])
    results, started = {}, []
    with ThreadPoolExecutor(len(workers)) as pool:
        for start, scored in pool.map(lambda indices: asyncio.run(worker_scores(job, indices)), workers):
            started.append(start)
            results.update(scored)
    order = range(len(job["samples"]))
    return [results[i][0] for i in order], [results[i][1] for i in order], min(started)


async def worker_scores(job: dict, indices: list[int]) -> tuple[float, dict[int, tuple[float, float]]]:
    """When the worker started (time.time()), and sample index -> (score, seconds) for the
    samples it scores."""
    reward = OmegaConf.load(REWARD_CONFIG)
    reward.num_workers = 1
    reward.custom_reward_function.path = "pkg://gagar_client.grouped"
    reward.custom_reward_function.name = "compute_score"
    reward.custom_reward_function.reward_kwargs = job["reward_kwargs"]
    config = OmegaConf.create({"actor_rollout_ref": {"model": {"path": job["tokenizer"], "tokenizer_path": None}}})
    config.reward = reward
    worker = RewardLoopWorker(config)  # built in the running loop, as in its Ray actor
    data = step_data(job, worker.input_tokenizer)
    start, started_at = time.monotonic(), time.time()

    async def timed(i: int) -> tuple[float, float]:
        result = await worker.compute_score(data[i:i + 1])
        return result["reward_score"], time.monotonic() - start

    results = await asyncio.gather(*(asyncio.create_task(timed(i)) for i in indices))
    return started_at, dict(zip(indices, results, strict=True))


def batch_scores(job: dict) -> list[float]:
    """The same step through verl's BatchRewardManager and `gagar_client.verl.compute_score`."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(job["tokenizer"], local_files_only=True)
    data = step_data(job, tokenizer)
    rewards = BatchRewardManager(tokenizer, num_examine=0, compute_score=batch_compute_score,
                                 **job["batch_kwargs"])(data)
    last = data.batch["response_mask"].sum(-1) - 1
    return rewards[torch.arange(len(data)), last].tolist()


def main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    scores, seconds, started_at = grouped_scores(job)
    out = {"scores": scores, "seconds": seconds, "started_at": started_at}
    if "batch_kwargs" in job:
        out["batch_scores"] = batch_scores(job)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
