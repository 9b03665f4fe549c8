"""GAGAR rewards from verl's batch reward manager.

verl's `BatchRewardManager` (`verl/workers/reward_manager/batch.py`, registered as
`batch`) calls `compute_score(data_sources, solution_strs, ground_truths, extra_infos,
**reward_kwargs)` once with a whole step's responses and puts each returned score on its
response's last token. A step lists each prompt's `rollout.n` responses, in any order
(verl balances the batch across ranks first); `extra_infos` are the dataset rows'
`extra_info`, so the responses of one prompt are found by a key of it, `index` by default
(verl's example datasets write the row's index there). A prompt with fewer responses than
`group_size` (part of a group split across calls, or a validation of fewer responses per
prompt) is not graded: its responses keep their test scores, logged, as in
`gagar_client.grouped`; one with more raises.

With `algorithm.adv_estimator=grpo`, `algorithm.norm_adv_by_std_in_grpo=False` and
`algorithm.use_kl_in_reward=False`, verl's advantage is the score minus its group's
mean, and GAGAR advantages have a group mean of zero: verl trains on them unchanged
(docs/training.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from gagar_client.client import Client
from gagar_client.steps import (
    Sample,
    group_records,
    logger,
    next_step,
    score_number,
    step_values,
    test_rewards,
    test_score_function,
    whole_group_problem,
)


def compute_score(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict],
    *,
    url: str,
    run: str,
    test_score: str | Callable[..., float | dict],
    group_size: int,
    token_env: str = "GAGAR_TOKEN",
    group_key: str = "index",
    pass_threshold: float = 1.0,
    grader: str = "heuristic",
    deadline: float = 60.0,
    timeout: float = 30.0,
    advantage_config: dict | None = None,
) -> list[float]:
    """GAGAR's redistributed advantage of each response, in order.

    The keyword arguments come from verl's `reward_kwargs`: `url` of the app, the name of
    the environment variable holding the API token (`token_env`), the `run`, and
    `test_score`, your test verdict as verl's per-sample reward function
    `f(data_source, solution_str, ground_truth, extra_info) -> float | {"score": ...}`,
    given as `"module:function"` (or the function itself), and `group_size`, verl's
    `actor_rollout_ref.rollout.n`. A response passes when its test score is at least
    `pass_threshold`; the response text is its patch.

    Groups the app did not rank (not within `deadline` seconds, their grading failed or
    was cancelled, or the app unreachable) get their plain GRPO advantages on the app's
    scale (`gagar_client.grpo`), never their test scores; each is logged as a warning and
    training goes on.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"compute_score: group_size must be verl's rollout.n, at least 2; got {group_size!r}")
    token = os.environ.get(token_env)
    if not token:
        raise ValueError(f"compute_score: the API token goes in the environment variable {token_env} (token_env)")
    score = test_score_function(test_score)
    n = len(solution_strs)
    scores = test_rewards([score_number(score(data_source=data_sources[i], solution_str=solution_strs[i],
                                         ground_truth=ground_truths[i], extra_info=extra_infos[i]))
                           for i in range(n)], n, f"compute_score: test_score {test_score!r}")
    members: dict[str, list[int]] = {}
    for i, extra in enumerate(extra_infos):
        if not isinstance(extra, dict) or group_key not in extra:
            raise ValueError(f"compute_score: response {i} has no extra_info[{group_key!r}] (group_key) to find its "
                             "prompt's group by; write one into the dataset's extra_info")
        members.setdefault(str(extra[group_key]), []).append(i)
    out = list(scores)  # a group not graded keeps its test scores
    records, order = [], []
    for task, indices in members.items():
        if problem := whole_group_problem(task, len(indices), group_size):
            if len(indices) > group_size:
                raise ValueError(f"compute_score: {problem}; give compute_score verl's rollout.n as group_size")
            logger.warning("GAGAR %s: %s; it is not graded, its responses keep their test scores", run, problem)
            continue
        samples = [Sample(reward=scores[i], patch=solution_strs[i],
                          messages=[{"role": "assistant", "content": solution_strs[i]}]) for i in indices]
        records += group_records(task, samples, position=len(order) // group_size, statement=None,
                                 pass_threshold=pass_threshold)
        order += indices
    if not records:
        return out
    with Client(url, token, timeout=timeout) as client:
        step = next_step(run, client)
        values, _ = step_values(client, records, run=run, step=step, grader=grader, deadline=deadline,
                                advantage_config=advantage_config)
    for i, value in zip(order, values, strict=True):
        out[i] = value
    return out

