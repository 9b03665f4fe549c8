"""GAGAR rewards in ART (OpenPipe's Agent Reinforcement Trainer): a drop-in for
`art.rewards.ruler_score_group`.

    from functools import partial
    from gagar_client.art import gagar_score_group

    groups = await art.gather_trajectory_groups(
        (art.TrajectoryGroup(rollout(model, scenario) for _ in range(8)) for scenario in scenarios),
        after_each=partial(gagar_score_group, url=..., run="run-7", group_size=8))
    await backend.train(model, groups, scale_rewards=False)

Like RULER it takes a `TrajectoryGroup` and returns a new one whose trajectories' `reward`
is the score (here GAGAR's advantage), the original reward kept in
`metrics["independent_reward"]`. Each trajectory's `reward` on the way in is its test
verdict (it passes at `pass_threshold`); `metadata[task_key]` names its task.

ART 0.5.18 turns rewards into advantages in `art.preprocessing.tokenize.tokenize_trajectory_groups`:
`reward - mean` over the group, divided by `std + 1e-6` (the population std) when
`scale_rewards` is on, its default. No values can keep GRPO's passing sum through that
division (it makes every group's std 1, and equal passing values are the only ones with
GRPO's passing sum at that std), so train with `scale_rewards=False`: then GAGAR's values,
of group mean zero, come back unchanged. They are taken on ART's default scale, GRPO
normalised by the population std (`unbiased_std` off): the passing trajectories keep the
sum ART's own GRPO gives them, shared by GAGAR's ranking. ART then divides every advantage
of a packed batch by one number, their token-weighted mean magnitude
(`art.preprocessing.pack`), as it does for its own.
"""

from __future__ import annotations

from collections.abc import Callable

import art

from gagar_client import whole
from gagar_client.steps import Sample, final_text

SOURCE = "gagar_client.art"
# ART's GRPO: (reward - mean) / (population std + 1e-6), the app's eps.
SCALE = {"norm_by_std": True, "unbiased_std": False}


def final_message(trajectory: art.Trajectory) -> str:
    """The trajectory's last message as text: the default patch, for a model that answers
    with a diff. An agent that edits a repository gives its final diff instead."""
    return final_text(trajectory.messages())


async def gagar_score_group(
    group: art.TrajectoryGroup,
    *,
    url: str,
    run: str,
    group_size: int,
    token_env: str = "GAGAR_TOKEN",
    task_key: str = "task_id",
    patch_of: Callable[[art.Trajectory], str] = final_message,
    pass_threshold: float = 1.0,
    grader: str = "heuristic",
    deadline: float = 60.0,
    batch_window: float = 1.0,
    timeout: float = 30.0,
    advantage_config: dict | None = None,
) -> art.TrajectoryGroup:
    """`group` scored by GAGAR: a copy whose trajectories' rewards are GAGAR's advantages.

    `group_size`: the trajectories made per scenario. A group whose trajectories and
    exceptions (rollouts that raised) do not add up to it raises, naming the group: a group
    split across calls must not be graded as two. `patch_of(trajectory)`: its final patch.

    The group is sent as part of a step of the run `run` (the groups scored within
    `batch_window` seconds of each other share one); a group the app does not rank within
    `deadline` seconds, cannot reach, or refuses gets its plain GRPO advantages on ART's
    scale (`gagar_client.grpo`), logged. `advantage_config` may set the app's other
    advantage options, not `norm_by_std` or `unbiased_std`.
    """
    settings = whole.group_settings(SOURCE, url=url, run=run, group_size=group_size, token_env=token_env,
                                    pass_threshold=pass_threshold, grader=grader, deadline=deadline, timeout=timeout,
                                    batch_window=batch_window, advantage_config=advantage_config, scale=SCALE)
    tasks = sorted({str(t.metadata.get(task_key)) for t in group.trajectories})
    if not group.trajectories or any(task_key not in t.metadata for t in group.trajectories):
        raise ValueError(f"{SOURCE}: every trajectory needs metadata[{task_key!r}] (task_key) naming its task")
    if len(tasks) != 1:
        raise ValueError(f"{SOURCE}: the trajectories are of the tasks {tasks}, not one group")
    samples = [Sample(reward=float(t.reward), patch=patch_of(t), messages=t.messages()) for t in group.trajectories]
    values = await whole.grade_group(SOURCE, settings, tasks[0], samples,
                                     rollouts=len(group.trajectories) + len(group.exceptions))
    scored = [t.model_copy(update={"reward": value,
                                   "metrics": {**t.metrics, "independent_reward": t.reward, "gagar_reward": value}})
              for t, value in zip(group.trajectories, values, strict=True)]
    return group.model_copy(update={"trajectories": scored})
