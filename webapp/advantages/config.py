"""A batch's redistribution config: `AdvantageConfig` declares its fields once, and every way
in (the config form, the `advantages` command, exports, the API, a stored config) reads one
through `parse_advantage_config`. It imports no models: a new batch's default comes from here."""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from grading.rankings import FLAGS
from grading.schedules import SCHEDULES, cap, describe_schedule

# Flags that cap a trajectory's factor at w_flag when the batch sets one. A new batch caps
# them at DEFAULT_W_FLAG = 0: a trajectory flagged as a reward hack or as editing the tests
# keeps its rank but gets no share of its group's positive advantage (docs/annotation.md).
DEFAULT_FLAG_NAMES = ("reward_hacking", "edits_tests")
DEFAULT_W_FLAG = 0.0


@dataclass(frozen=True)
class AdvantageConfig:
    """A batch's redistribution config. Its fields and defaults are the only ones: the API's
    schema, the config form and the `advantages` command derive theirs from these, and
    `parse_advantage_config` takes from here what it is not given."""

    schedule: str
    params: Mapping[str, Any] = field(default_factory=dict)  # the schedule's, read-only
    norm_by_std: bool = True
    unbiased_std: bool = True
    w_flag: float | None = DEFAULT_W_FLAG  # None: flags cap nothing
    flag_names: tuple[str, ...] = DEFAULT_FLAG_NAMES

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def as_dict(self) -> dict:
        """As stored and answered: a mapping as a dict, a tuple as a list."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value):
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


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
        base = AdvantageConfig(schedule=data["schedule"])
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
        w_flag = cap("w_flag", w_flag)
    flag_names = data.get("flag_names", base.flag_names)
    unknown = sorted(set(flag_names) - set(FLAGS))
    if unknown:
        raise ValueError(f"unknown flags {unknown}; flags are {list(FLAGS)}")
    return AdvantageConfig(schedule=schedule, params=params,
                           norm_by_std=bool(data.get("norm_by_std", base.norm_by_std)),
                           unbiased_std=bool(data.get("unbiased_std", base.unbiased_std)), w_flag=w_flag,
                           flag_names=tuple(f for f in FLAGS if f in set(flag_names)))


# A new batch's config; a batch keeps the one it was made with (models.default_advantage_config).
DEFAULT_CONFIG = parse_advantage_config({"schedule": "linear", "params": {"w_min": 0.2}})
