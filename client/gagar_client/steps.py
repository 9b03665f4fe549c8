"""One training step's groups as rollout records, graded by the app: what the TRL and verl
reward functions share."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gagar_client.client import Client

logger = logging.getLogger("gagar_client")

# A step's number is how many steps this process has sent for the run before it: verl's
# reward functions are not told verl's global step.
_steps: dict[str, itertools.count] = {}


@dataclass(frozen=True)
class Sample:
    """One trajectory of a group: its test reward, final patch and transcript."""

    reward: float
    patch: str
    messages: list[dict]


def group_records(task: str, samples: Sequence[Sample], *, position: int, statement: str | None,
                  pass_threshold: float) -> list[dict]:
    """Rollout-format records of one group, trajectories `r1`..`rk` in the samples' order.

    The group is named `<task>:<fingerprint>`, a digest of its `position` in the step and
    its samples: a retry sends the same names (a no-op in the app), and another round of
    the same step (an evaluation, a resumed run) adds groups of its own instead of
    colliding with the first. `statement`: the task's text, when the trainer has it.
    """
    content = json.dumps([task, position, [(s.reward, s.patch, s.messages) for s in samples]],
                         sort_keys=True, default=str)
    group_id = f"{task}:{hashlib.sha256(content.encode()).hexdigest()[:10]}"
    records = [{"group_id": group_id, "trajectory_id": f"r{i}", "reward": s.reward,
                "passed": s.reward >= pass_threshold, "patch": _storable(s.patch), "messages": _storable(s.messages)}
               for i, s in enumerate(samples, start=1)]
    if statement is not None:
        records[0]["task"] = {"id": task, "statement": _storable(statement)}
    return records


def _storable(value):
    """`value` with every NUL character, which a model may well emit and the app's database
    cannot store, sent as U+FFFD (the replacement character) instead of failing the step."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    return value


def step_values(client: Client, records: list[dict], *, run: str, step: int, grader: str, deadline: float,
                advantage_config: dict | None) -> tuple[list[float], dict[str, str]]:
    """Each record's reward for the trainer, in order, and group_id -> reason for the groups
    that fell back to plain rewards; each fallback is logged as a warning."""
    result = client.grade_step(records, run=run, step=step, grader=grader, deadline=deadline,
                               advantage_config=advantage_config)
    for group_id, reason in sorted(result.fallback.items()):
        logger.warning("GAGAR %s step %s: group %s keeps plain rewards (%s)", run, step, group_id, reason)
    return [result.rewards[(r["group_id"], r["trajectory_id"])] for r in records], result.fallback


def test_rewards(values: Sequence, n: int, source: str) -> list[float]:
    """`values` as n finite floats, or ValueError naming `source` and the bad value."""
    rewards = list(values)
    if len(rewards) != n:
        raise ValueError(f"{source} returned {len(rewards)} values for {n} completions")
    for i, value in enumerate(rewards):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{source} gave completion {i} the reward {value!r}; each needs a finite number")
    return [float(r) for r in rewards]


def next_step(run: str) -> int:
    """The number of the next step this process sends for `run`: 0, 1, 2, ..."""
    return next(_steps.setdefault(run, itertools.count()))


def test_score_function(test_score: str | Callable) -> Callable:
    """verl's per-sample test verdict, given as the function or as `"module:function"`."""
    if callable(test_score):
        return test_score
    module, _, name = str(test_score).partition(":")
    if not name:
        raise ValueError(f"compute_score: test_score must be 'module:function', got {test_score!r}")
    return getattr(importlib.import_module(module), name)


def score_number(score: float | dict) -> float:
    """A verl score as a number: verl's reward functions may return `{"score": ...}`."""
    return score["score"] if isinstance(score, dict) else score
