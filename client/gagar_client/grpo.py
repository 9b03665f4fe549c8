"""Plain GRPO advantages, computed as the app computes them: the trainer's values for a step
the app could not be reached for.

A trainer set up for GAGAR does not normalise rewards itself (TRL `scale_rewards="none"`,
verl `norm_adv_by_std_in_grpo=False`): it only subtracts each group's mean. A graded step's
values are std-normalised advantages; were an unreachable app's step to give the raw test
rewards instead, that step's effective learning rate would change 2-3x. So the client gives
what the app's plain GRPO gives under the step's advantage config (grading/advantages.py
`grpo_advantages`): (r - mean) / (std + eps) per group, the sample std unless `unbiased_std`
is off, a group of one (or of equal rewards) 0, and r - mean alone when `norm_by_std` is off.
Sums run in the app's order (each group's trajectories by id) so the values match it.
tests/client/test_fallback_scale.py checks them against the app's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# The fields of the app's advantage config (webapp/advantages/config.py) that plain GRPO reads,
# with their defaults for a new step, overridden by the `advantage_config` a trainer sends; the
# test above holds them to the app's declaration.
DEFAULTS = {"norm_by_std": True, "unbiased_std": True}
EPS = 1e-6


def grpo_values(rewards: Sequence[float], keys: Sequence[tuple[str, str]], config: Mapping | None = None
                ) -> list[float]:
    """The plain GRPO advantage of each reward, `keys` its (group_id, trajectory_id), under
    the advantage config `config` (the overrides a trainer sends; the rest the app's defaults)."""
    settings = {**DEFAULTS, **{k: v for k, v in (config or {}).items() if k in DEFAULTS}}
    members: dict[str, list[int]] = {}
    for i, (group, _) in enumerate(keys):
        members.setdefault(group, []).append(i)
    out = [0.0] * len(rewards)
    for indices in members.values():
        indices = sorted(indices, key=lambda i: keys[i][1].encode())  # code point order, as the app reads them
        total = 0.0
        for i in indices:
            total += rewards[i]
        mean = total / len(indices)
        deviations = [rewards[i] - mean for i in indices]
        if settings["norm_by_std"]:
            ddof = 1 if settings["unbiased_std"] else 0
            squares = 0.0
            for d in deviations:
                squares += d * d
            std = math.sqrt(squares / (len(indices) - ddof)) if len(indices) > ddof else 0.0
            deviations = [d / (std + EPS) for d in deviations]
        for i, d in zip(indices, deviations, strict=True):
            out[i] = d
    return out
