"""One training step's groups as rollout records, graded by the app: what the reward
functions for every trainer share."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gagar_client.client import Client

logger = logging.getLogger("gagar_client")

# verl's reward functions are not told verl's global step: a step's number is how many steps
# this process has sent for the run before it, counted on from the run's latest step in the
# app (so a resumed run goes on after its steps instead of colliding with them).
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


# What the app's importer refuses in a record that group_records makes (grading/rollouts.py and
# the readers and limits it uses, which a trainer, without the app, cannot import), mirrored here
# and nowhere else; tests/client/test_rules.py checks that the app refuses exactly the samples
# these refuse. A rule the app adds later is still met: the app refuses that group alone
# (gagar_client.grouped).
MAX_ID_CHARS = 512  # group_id, trajectory_id, task.id
MAX_LINE_BYTES = 32 * 1024 * 1024  # one record's JSON line, as Client.grade_step sends it
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1: never in an id
_SURROGATE = re.compile("[\ud800-\udfff]")  # unpaired: no UTF-8 form, refused in any text
FINGERPRINT_CHARS = 11  # what group_records adds to a task's key: ":" and 10 hex digits
MAX_KEY_CHARS = MAX_ID_CHARS - FINGERPRINT_CHARS  # the longest group key (task) the app takes


def record_problems(record: dict) -> list[tuple[str, str]]:
    """`(field, reason)` for each thing the app's importer would refuse in `record`, a record
    of group_records (NUL characters already replaced), named as the importer names them;
    empty when the app takes it."""
    problems = []
    ids = (("group_id", record.get("group_id")), ("trajectory_id", record.get("trajectory_id")),
           ("task.id", (record.get("task") or {}).get("id")))
    for field, value in ids:
        if value is None:
            continue
        if not value:
            problems.append((field, "must not be empty"))
        elif len(value) > MAX_ID_CHARS:
            problems.append((field, f"is {len(value)} characters long, over the limit of {MAX_ID_CHARS}"))
        elif CONTROL_CHARACTERS.search(value):
            problems.append((field, "must not contain control characters"))
    named = {field for field, _ in problems}
    problems += [(field, reason) for field, reason in _unstorable(record, "") if field not in named]
    size = len(json.dumps(record))  # ASCII: its length is its size in bytes
    if size > MAX_LINE_BYTES:
        problems.append(("line", f"is {size} bytes, over the limit of {MAX_LINE_BYTES}"))
    return problems


def sample_problems(task: str, sample: Sample, names: dict[str, str]) -> list[str]:
    """Why the app would refuse `sample` in a group keyed `task`: `name: reason` each, the
    record's fields named by `names` (the caller's name for each; others as the app names
    them), each once; empty when the app takes it. Checked as the first record of its group:
    a later one's trajectory id is a digit or two longer, which only a line within bytes of
    the app's limit would notice (the app then refuses that group alone)."""
    record = group_records(task, [sample], position=0, statement=None, pass_threshold=1.0)[0]
    found = []
    for field, reason in record_problems(record):
        if field == "group_id" and len(record["group_id"]) > MAX_ID_CHARS:
            reason = (f"is {len(task)} characters long, over the limit of {MAX_KEY_CHARS} (the app's {MAX_ID_CHARS} "
                      f"for a group's name, less the {FINGERPRINT_CHARS} of the group's fingerprint)")
        elif field == "line":
            reason = f"{reason} for a rollout line"
        problem = f"{names.get(field, field)}: {reason}"
        if problem not in found:
            found.append(problem)
    return found


def _unstorable(value, path: str):
    """`(field, reason)` for each value or key the app cannot store (grading/rollouts.py's
    _unencodable): non-finite numbers, unpaired surrogates, NUL characters."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path, f"must be a finite number, got {value!r}"
    elif isinstance(value, str) and _SURROGATE.search(value):
        yield path, "contains an unpaired surrogate escape"
    elif isinstance(value, str) and "\x00" in value:
        yield path, "contains a NUL character (\\u0000), which the database cannot store"
    elif isinstance(value, dict):
        for key, element in value.items():
            field = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _SURROGATE.search(key):
                yield field, "name contains an unpaired surrogate escape"
            yield from _unstorable(element, field)
    elif isinstance(value, list):
        for index, element in enumerate(value):
            yield from _unstorable(element, f"{path}[{index}]")


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
                advantage_config: dict | None, append: bool = False) -> tuple[list[float], dict[str, str]]:
    """Each record's reward for the trainer, in order, and group_id -> reason for the groups
    that fell back to their plain GRPO advantages; each fallback is logged as a warning."""
    result = client.grade_step(records, run=run, step=step, grader=grader, deadline=deadline,
                               advantage_config=advantage_config, append=append)
    for group_id, reason in sorted(result.fallback.items()):
        logger.warning("GAGAR %s step %s: group %s gets its plain GRPO advantages (%s)", run, step, group_id,
                       reason)
    return [result.rewards[(r["group_id"], r["trajectory_id"])] for r in records], result.fallback


def final_text(content: str | list[dict]) -> str:
    """A completion as text: a plain one as it is, a conversational one's last message content."""
    if isinstance(content, str):
        return content
    return str(content[-1].get("content") or "") if content else ""


def as_messages(content: str | list[dict], role: str) -> list[dict]:
    """A prompt or completion as chat messages (a conversational one already is)."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    return [dict(message) for message in content]


def whole_group_problem(key: str, count: int, group_size: int, size_name: str = "group_size") -> str | None:
    """Why a group handed over in one call is not whole, or None: part of a group split across
    calls (or a `group_size` other than the trainer's) must never be graded as a group of its own."""
    if count == group_size:
        return None
    cause = (f"part of a group split across calls, or fewer responses per prompt than {size_name}"
             if count < group_size else f"more responses per prompt than {size_name}")
    return f"group {key!r} has {count} responses where {size_name} is {group_size} ({cause})"


def test_rewards(values: Sequence, n: int, source: str) -> list[float]:
    """`values` as n finite floats, or ValueError naming `source` and the bad value."""
    rewards = list(values)
    if len(rewards) != n:
        raise ValueError(f"{source} returned {len(rewards)} values for {n} completions")
    for i, value in enumerate(rewards):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{source} gave completion {i} the reward {value!r}; each needs a finite number")
    return [float(r) for r in rewards]


def next_step(run: str, client: Client | None = None) -> int:
    """The number of the next step this process sends for `run`: on the first call, one after
    the run's latest step in the app (0 for a new run, or when `client` is None or cannot
    reach the app: logged), then one more each call."""
    if run not in _steps:
        start = 0
        if client is not None:
            try:
                latest = client.latest_step(run)
            except Exception as error:  # the app down: the step falls back anyway; count from 0
                logger.warning("GAGAR %s: the run's latest step is unknown (%s); counting steps from 0", run, error)
            else:
                start = 0 if latest is None else latest + 1
        _steps[run] = itertools.count(start)
    return next(_steps[run])


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
