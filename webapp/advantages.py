"""Advantages of a batch: GRPO, then GAGAR redistribution over final rankings.

One row per trajectory, in a stable order (group, then trajectory id), so
the same inputs and config always give the same table. A group's ranking is
its final ranking (`webapp.rankings`); a group without one keeps its GRPO
advantages (source "none"). A batch keeps its redistribution config; every
way in (the config form, the `advantages` command, later the API) reads one
through `parse_advantage_config`.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from grading.advantages import gagar_advantages
from grading.rankings import FLAGS
from grading.schedules import SCHEDULES, describe_schedule, unit
from webapp.models import Batch, Group, Trajectory
from webapp.rankings import FinalRanking, final_rankings

ROW_FIELDS = (
    "group_id", "trajectory_id", "reward", "passed", "label", "grpo_advantage",
    "factor", "rank", "advantage", "source", "flags", "grader_version",
)
# Flags that cap a trajectory's factor at w_flag when the batch sets one.
DEFAULT_FLAG_NAMES = ("reward_hacking", "edits_tests")


@dataclass(frozen=True)
class AdvantageConfig:
    schedule: str
    params: dict
    norm_by_std: bool = True
    unbiased_std: bool = True
    w_flag: float | None = None
    flag_names: tuple[str, ...] = DEFAULT_FLAG_NAMES

    @classmethod
    def from_dict(cls, config: dict) -> "AdvantageConfig":
        return cls(
            schedule=config["schedule"],
            params=dict(config.get("params", {})),
            norm_by_std=config.get("norm_by_std", True),
            unbiased_std=config.get("unbiased_std", True),
            w_flag=config.get("w_flag"),
            flag_names=tuple(config.get("flag_names", DEFAULT_FLAG_NAMES)),
        )

    def as_dict(self) -> dict:
        return {
            "schedule": self.schedule, "params": dict(self.params), "norm_by_std": self.norm_by_std,
            "unbiased_std": self.unbiased_std, "w_flag": self.w_flag, "flag_names": list(self.flag_names),
        }


def parse_advantage_config(data: Mapping, *, base: AdvantageConfig | None = None) -> AdvantageConfig:
    """A validated config from `data`, which holds any of AdvantageConfig's fields; ValueError
    names the field and the reason.

    With `base` (a config being overridden) what `data` leaves out comes from `base`, and
    `params` update base's while the schedule stays; without, `schedule` is required and the
    rest takes the defaults. Parameters given neither way take the schedule's defaults.
    `factors` may be text, "1, 0.6, 0.3", as a form or a command line gives it.
    """
    unknown = sorted(set(data) - {f.name for f in fields(AdvantageConfig)})
    if unknown:
        raise ValueError(f"unknown config fields {unknown}")
    if base is None:
        if "schedule" not in data:
            raise ValueError("schedule: required")
        base = AdvantageConfig(schedule=data["schedule"], params={})
    schedule = data.get("schedule", base.schedule)
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r} (known schedules: {', '.join(sorted(SCHEDULES))})")
    params = dict(data.get("params", {}))
    if isinstance(params.get("factors"), str):
        try:
            params["factors"] = [float(x) for x in params["factors"].split(",") if x.strip()]
        except ValueError:
            raise ValueError("factors must be numbers separated by commas") from None
    if schedule == base.schedule:
        params = {**base.params, **params}
    params = describe_schedule(schedule, params)["params"]
    w_flag = data.get("w_flag", base.w_flag)
    if w_flag is not None:
        w_flag = unit("w_flag", w_flag)
    flag_names = data.get("flag_names", base.flag_names)
    unknown = sorted(set(flag_names) - set(FLAGS))
    if unknown:
        raise ValueError(f"unknown flags {unknown}; flags are {list(FLAGS)}")
    return AdvantageConfig(schedule=schedule, params=params,
                           norm_by_std=bool(data.get("norm_by_std", base.norm_by_std)),
                           unbiased_std=bool(data.get("unbiased_std", base.unbiased_std)), w_flag=w_flag,
                           flag_names=tuple(f for f in FLAGS if f in set(flag_names)))


def advantage_config_update(*, batch: Batch, **given) -> AdvantageConfig:
    """Validate a redistribution config (`given`: AdvantageConfig's fields; what is left out
    takes the defaults) and keep it with `batch`; ValueError says what is wrong."""
    config = parse_advantage_config(given)
    batch.advantage_config = config.as_dict()
    batch.save(update_fields=["advantage_config"])
    return config


def advantage_rows(batch: Batch, config: AdvantageConfig | None = None) -> list[dict]:
    """Rows of ROW_FIELDS for every trajectory of `batch`."""
    config = config or AdvantageConfig.from_dict(batch.advantage_config)
    return _rows(_listed(Trajectory.objects.filter(batch=batch)), config)


def group_advantage_rows(group: Group) -> list[dict]:
    """Rows of ROW_FIELDS for the trajectories of one group, under its batch's config."""
    config = AdvantageConfig.from_dict(group.batch.advantage_config)
    return _rows(_listed(Trajectory.objects.filter(group=group)), config)


def ranking_advantage_rows(group: Group, ranking: FinalRanking | None, trajectories=None) -> list[dict]:
    """Rows of ROW_FIELDS for one group as if `ranking` were its final ranking (None: no
    ranking): what the group page shows once it has decided, and the editor's live preview.
    `trajectories` (Trajectory objects of the group) saves the page a query."""
    config = AdvantageConfig.from_dict(group.batch.advantage_config)
    if trajectories is None:
        listed = _listed(Trajectory.objects.filter(group=group))
    else:
        listed = sorted(((t.pk, group.pk, group.group_id, t.trajectory_id, t.reward, t.passed) for t in trajectories),
                        key=lambda t: t[3])
    return _rows(listed, config, {group.pk: ranking} if ranking is not None else {})


def _listed(trajectories) -> list[tuple]:
    return list(
        trajectories.order_by("group__group_id", "trajectory_id").values_list(
            "pk", "group_id", "group__group_id", "trajectory_id", "reward", "passed"
        )
    )


def _rows(trajectories: list[tuple], config: AdvantageConfig,
          rankings: dict[int, FinalRanking] | None = None) -> list[dict]:
    """`trajectories`: (pk, group pk, group id, trajectory id, reward, passed), ordered by group
    id then trajectory id. `rankings` replaces the final rankings when given."""
    if not trajectories:
        return []
    group_pks, group_index = np.unique(np.array([t[1] for t in trajectories]), return_inverse=True)
    rewards = np.array([t[4] for t in trajectories], dtype=np.float64)
    passed = np.array([t[5] for t in trajectories], dtype=bool)
    if rankings is None:
        rankings = final_rankings(group_pks.tolist())
    rankings = _usable(rankings, trajectories, config)
    n = len(trajectories)
    ranks = np.zeros(n, dtype=np.int64)
    scores = np.full(n, np.nan)
    flagged = np.zeros(n, dtype=bool)
    flag_names = set(config.flag_names)
    for i, (_, group_pk, _, trajectory_id, _, _) in enumerate(trajectories):
        ranking = rankings.get(group_pk)
        if ranking is None or trajectory_id not in ranking.rank_of:
            continue
        ranks[i] = ranking.rank_of[trajectory_id]
        if ranking.final.scores:
            scores[i] = ranking.final.scores.get(trajectory_id, np.nan)
        flagged[i] = bool(flag_names.intersection(ranking.final.flags.get(trajectory_id, ())))
    use_flags = config.w_flag is not None and flagged.any()
    result = gagar_advantages(
        rewards, group_index, passed, ranks,
        schedule=config.schedule, params=config.params,
        scores=scores if config.schedule == "scores" else None,
        flagged=flagged if use_flags else None, w_flag=config.w_flag if use_flags else None,
        norm_by_std=config.norm_by_std, unbiased_std=config.unbiased_std,
    )
    labels = result.label_names()
    rows = []
    for i, (_, group_pk, group_id, trajectory_id, reward, is_passed) in enumerate(trajectories):
        factor = result.factors[i]
        ranking = rankings.get(group_pk)
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
            "source": ranking.final.source if ranking else "none",
            "flags": list(ranking.final.flags.get(trajectory_id, ())) if ranking else [],
            "grader_version": ranking.final.grader_version if ranking else "",
        })
    return rows


@dataclass(frozen=True)
class _Usable:
    final: FinalRanking
    rank_of: dict[str, int]


def _usable(rankings: dict[int, FinalRanking], trajectories, config: AdvantageConfig) -> dict[int, _Usable]:
    """The rankings that rank exactly the passing trajectories of their group (and, for the
    scores schedule, score every one of them); the other groups are left unranked."""
    passing: dict[int, set[str]] = {}
    for _, group_pk, _, trajectory_id, _, is_passed in trajectories:
        if is_passed:
            passing.setdefault(group_pk, set()).add(trajectory_id)
    out = {}
    for group_pk, final in rankings.items():
        rank_of = final.ranks()
        if set(rank_of) != passing.get(group_pk, set()):
            continue
        if config.schedule == "scores" and not (
                final.scores and all(math.isfinite(final.scores.get(t, math.nan)) for t in rank_of)):
            continue
        out[group_pk] = _Usable(final, rank_of)
    return out


@dataclass(frozen=True)
class Histogram:
    """Counts per bin, shared edges (len(counts) + 1), for GRPO and redistributed advantages."""

    edges: list[float]
    before: list[int]
    after: list[int]
    n: int


def advantage_histogram(batch: Batch, *, bins: int = 16, rows: list[dict] | None = None) -> Histogram:
    """Distribution of the advantages of the mixed groups' trajectories, before and after
    redistribution (the other groups' advantages are all zero)."""
    rows = advantage_rows(batch) if rows is None else rows
    mixed = [r for r in rows if r["label"] == "mixed"]
    if not mixed:
        return Histogram(edges=[], before=[], after=[], n=0)
    before = np.array([r["grpo_advantage"] for r in mixed])
    after = np.array([r["advantage"] for r in mixed])
    low, high = float(min(before.min(), after.min())), float(max(before.max(), after.max()))
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    return Histogram(
        edges=edges.tolist(),
        before=np.histogram(before, edges)[0].tolist(),
        after=np.histogram(after, edges)[0].tolist(),
        n=len(mixed),
    )
