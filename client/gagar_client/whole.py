"""Groups that a trainer hands over whole, one call per group: verifiers' `Rubric.score_group`
and ART's `after_each` (gagar_client.verifiers, gagar_client.art).

Each call's group is parked whole in `gagar_client.grouped`'s buffer of the running event
loop, so that the groups a step scores concurrently share app requests (those complete
within `batch_window` of each other), with that buffer's fallbacks: a group the app does not
rank (late, unreachable, refusing it) gets its plain GRPO advantages on the app's scale
under the step's advantage config, never its test scores. A call whose group is not whole
(part of a group split across calls, a `group_size` other than the trainer's) raises before
anything is sent: its part must not be graded as a group of its own.
"""

from __future__ import annotations

import asyncio
import json
import os

from gagar_client import grouped
from gagar_client.steps import Sample, sample_problems, whole_group_problem


def group_settings(source: str, *, url: str, run: str, group_size: int, token_env: str, pass_threshold: float,
                   grader: str, deadline: float, timeout: float, batch_window: float,
                   advantage_config: dict | None, scale: dict) -> grouped.Settings:
    """The buffer's settings for one integration (`source`, named in errors). `scale`: the
    advantage config keys that put the values on the scale the trainer's own GRPO uses; an
    `advantage_config` that sets them otherwise raises."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"{source}: group_size must be the trainer's rollouts per prompt, at least 2; "
                         f"got {group_size!r}")
    token = os.environ.get(token_env)
    if not token:
        raise ValueError(f"{source}: the API token goes in the environment variable {token_env} (token_env)")
    config = dict(advantage_config or {})
    if clashing := {key: value for key, value in config.items() if key in scale and value != scale[key]}:
        raise ValueError(f"{source}: advantage_config {clashing} would change the scale the trainer's GRPO "
                         f"gives the values; this integration takes {scale}")
    config.update(scale)
    return grouped.Settings(url=url, token=token, run=run, grader=grader, deadline=float(deadline),
                            timeout=float(timeout), advantage_config=json.dumps(config, sort_keys=True),
                            pass_threshold=float(pass_threshold), group_size=group_size, group_timeout=0.0,
                            batch_window=float(batch_window))


async def grade_group(source: str, settings: grouped.Settings, key: str, samples: list[Sample], *,
                      rollouts: int) -> list[float]:
    """Each sample's value, in order, once its group is graded (or fallen back). `rollouts`:
    how many rollouts the trainer made for this group (the samples, plus any it dropped as
    failed), checked against `settings.group_size`."""
    if problem := whole_group_problem(key, rollouts, settings.group_size):
        raise ValueError(f"{source}: {problem}; it is not graded")
    problems = [f"rollout {i}: {problem}" for i, sample in enumerate(samples)
                for problem in sample_problems(key, sample, {"group_id": "the group's key"})]
    if problems:
        raise ValueError(f"{source}: the app would refuse group {key!r}: {'; '.join(problems[:5])}")
    return list(await asyncio.gather(*grouped.park_group(settings, key, samples)))
