"""Advantages of a batch: GRPO, then GAGAR redistribution over final rankings.

One row per trajectory, in a stable order (group, then trajectory id), so
the same inputs and config always give the same table.
"""

from dataclasses import dataclass

import numpy as np

from grading.advantages import gagar_advantages
from webapp.models import Batch, Group, Trajectory

ROW_FIELDS = (
    "group_id", "trajectory_id", "reward", "passed", "label", "grpo_advantage",
    "factor", "rank", "advantage", "source",
)


@dataclass(frozen=True)
class AdvantageConfig:
    schedule: str
    params: dict
    norm_by_std: bool = True
    unbiased_std: bool = True

    @classmethod
    def from_dict(cls, config: dict) -> "AdvantageConfig":
        return cls(
            schedule=config["schedule"],
            params=dict(config.get("params", {})),
            norm_by_std=config.get("norm_by_std", True),
            unbiased_std=config.get("unbiased_std", True),
        )


def advantage_rows(batch: Batch, config: AdvantageConfig | None = None) -> list[dict]:
    """Rows of ROW_FIELDS for every trajectory of `batch`."""
    config = config or AdvantageConfig.from_dict(batch.advantage_config)
    return _rows(Trajectory.objects.filter(batch=batch), config)


def group_advantage_rows(group: Group) -> list[dict]:
    """Rows of ROW_FIELDS for the trajectories of one group, under its batch's config."""
    config = AdvantageConfig.from_dict(group.batch.advantage_config)
    return _rows(Trajectory.objects.filter(group=group), config)


def _rows(trajectories, config: AdvantageConfig) -> list[dict]:
    trajectories = list(
        trajectories.order_by("group__group_id", "trajectory_id").values_list(
            "pk", "group_id", "group__group_id", "trajectory_id", "reward", "passed"
        )
    )
    if not trajectories:
        return []
    _, group_index = np.unique(np.array([t[1] for t in trajectories]), return_inverse=True)
    rewards = np.array([t[4] for t in trajectories], dtype=np.float64)
    passed = np.array([t[5] for t in trajectories], dtype=bool)
    ranks = np.zeros(len(trajectories), dtype=np.int64)  # no rankings until grading lands
    result = gagar_advantages(
        rewards, group_index, passed, ranks,
        schedule=config.schedule, params=config.params,
        norm_by_std=config.norm_by_std, unbiased_std=config.unbiased_std,
    )
    labels = result.label_names()
    rows = []
    for i, (_, _, group_id, trajectory_id, reward, is_passed) in enumerate(trajectories):
        factor = result.factors[i]
        rows.append({
            "group_id": group_id,
            "trajectory_id": trajectory_id,
            "reward": reward,
            "passed": is_passed,
            "label": labels[group_index[i]],
            "grpo_advantage": float(result.grpo[i]),
            "factor": None if np.isnan(factor) else float(factor),
            "rank": int(ranks[i]) or None,
            "advantage": float(result.advantages[i]),
            "source": "none",
        })
    return rows
