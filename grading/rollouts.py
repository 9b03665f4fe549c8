"""Streaming reader and validator for the rollout format, version 2 (docs/rollout-format.md).

``read_rollouts`` yields valid rollouts one at a time and records every problem in an
``ErrorLog`` instead of stopping at the first, so one pass over a batch reports all of its
errors, up to the import's error limit (grading/limits.py: an import reads under limits
of its size, its lines and its errors, and of the size of a group). The caller decides
what errors mean; the importer rolls its transaction back. Memory stays bounded by the
longest accepted line plus one entry per trajectory id.

Version 2 adds what running a task's code needs, all optional and kept in the task's other
keys (so a file of version 1 reads, and hashes, as before): `snapshot`, `test_patch`,
`reward_tests` and `environment` (grading/execution/environment.py reads it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grading.execution.environment import Environment
from grading.jsonl import (
    CONTROL_CHARACTERS,
    ErrorLog,
    ImportStopped,
    OutOfRangeFloat,
    json_bytes,
    json_kind,
    read_json_lines,
)
from grading.limits import (  # the sizes of a line and of a group are named here too
    MAX_BASE_COMMIT_CHARS,
    MAX_GROUP_SIZE,  # noqa: F401
    MAX_ID_CHARS,
    MAX_LINE_BYTES,  # noqa: F401
    MAX_REPO_CHARS,
)

_COUNT_METRICS = ("num_turns", "output_tokens", "input_tokens")
_TOP_LEVEL = frozenset(
    ("group_id", "trajectory_id", "reward", "passed", "patch")
    + ("task", "messages", "tests", "metrics", "meta")
)
_TASK_KEYS = frozenset(("id", "statement", "repo", "base_commit", "reference_patch"))
# Version 2's keys for running the task's code: checked here, kept among the task's other keys.
_SNAPSHOT_CHARS = 1000


@dataclass(frozen=True, slots=True)
class TaskInfo:
    id: str
    statement: str
    repo: str
    base_commit: str
    reference_patch: str | None
    extra: dict


@dataclass(frozen=True, slots=True)
class Rollout:
    group_id: str
    trajectory_id: str
    reward: float
    passed: bool
    patch: str
    task: TaskInfo | None
    messages: list[dict] | None
    tests: dict | None
    metrics: dict
    meta: dict
    source: str
    line: int | None  # None for a record read from a whole JSON file
    content_hash: str


# The fields read from a rollout's line, besides its task: what its content hash covers.
_CONTENT_FIELDS = ("group_id", "trajectory_id", "reward", "passed", "patch", "messages",
                   "tests", "metrics", "meta")


def content_of(rollout: Rollout) -> dict:
    """What a rollout's ``content_hash`` covers: every field read from its line."""
    task = rollout.task
    return {**{name: getattr(rollout, name) for name in _CONTENT_FIELDS},
            "task": None if task is None else _task_content(task)}


def legacy_content_hash(rollout: Rollout) -> str:
    """The content hash as imports wrote it before they used orjson: the `json` module
    spells some floats differently (1e-08, not 1e-8), so a trajectory imported then has
    this hash, and re-importing it must still find it unchanged."""
    text = json.dumps(content_of(rollout), ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _task_content(task: TaskInfo) -> dict:
    return {**task.extra, **{key: getattr(task, key) for key in _TASK_KEYS}}


class RolloutFormatError(Exception):
    """The input is not valid rollout format; retrying the same input cannot help."""

    permanent = True

    def __init__(self, errors: ErrorLog) -> None:
        super().__init__(errors.summary())
        self.errors = errors

    def __reduce__(self):
        return type(self), (self.errors,)


def read_rollouts(
    paths: Iterable[str | Path],
    *,
    errors: ErrorLog,
    pass_threshold: float = 1.0,
    max_line_bytes: int | None = None,
) -> Iterator[Rollout]:
    """Yield the valid rollouts of ``paths`` in order, recording every problem in ``errors``
    (whose ``limits`` bound the import; ``max_line_bytes`` overrides their line size).

    Duplicate ids and conflicting tasks are checked across all the paths of one call, and
    a file given twice, under any spelling (``./f``, a link), is an error, not read again.
    The arguments are checked now; the files are read lazily, as the result is iterated.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    if not math.isfinite(pass_threshold):
        raise ValueError(f"pass_threshold must be finite, got {pass_threshold!r}")
    if max_line_bytes is not None and max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes!r}")
    return _read(paths, errors, float(pass_threshold), max_line_bytes)


def load_rollouts(paths: Iterable[str | Path], *, pass_threshold: float = 1.0) -> list[Rollout]:
    """Read every rollout of ``paths``; raise ``RolloutFormatError`` if anything is wrong."""
    errors = ErrorLog()
    rollouts = list(read_rollouts(paths, errors=errors, pass_threshold=pass_threshold))
    if errors:
        raise RolloutFormatError(errors)
    return rollouts


def _read(paths, errors: ErrorLog, pass_threshold: float, limit: int | None) -> Iterator[Rollout]:
    return validate_records(jsonl_records(paths, errors, limit), errors=errors,
                            pass_threshold=pass_threshold)


def validate_records(records: Iterable[tuple[str, int | None, dict, bool]], *, errors: ErrorLog,
                     pass_threshold: float) -> Iterator[Rollout]:
    """Yield the valid rollouts of ``records``, ``(source, line, record, suspicious)`` each:
    what the JSON Lines reader reads, or what a format adapter (``grading.formats``) makes
    of another format. Problems go to ``errors``, named by source and line; reading ends
    when ``errors`` stops the import (ImportStopped), its errors saying why. A group may
    have at most ``errors.limits.group_size`` trajectories."""
    batch = _Batch(errors, pass_threshold)
    try:
        for source, line, record, suspicious in records:
            rollout = batch.validate(record, source, line, suspicious)
            if rollout is not None:
                yield rollout
    except ImportStopped:
        return


def jsonl_records(paths, errors: ErrorLog, limit: int | None = None):
    """``(source, line, record, suspicious)`` for each parsed line of ``paths``, each file
    read once however it is spelled."""
    for path, source in distinct_files(paths, errors):
        for line, record, suspicious in read_json_lines(Path(path), source, errors, limit):
            yield source, line, record, suspicious


def distinct_files(paths, errors: ErrorLog) -> Iterator[tuple[str | Path, str]]:
    """``(path, source)`` for each of ``paths`` not given before under another spelling
    (``./f``, a link); a repeat is an error, not read again."""
    given: dict[tuple[int, int], str] = {}  # (device, inode) -> how it was first named
    for path in paths:
        source = str(path)
        identity = _file_identity(path)
        if identity in given:
            reason = f"is the same file as {given[identity]}, given before; give each file once"
            errors.add(source, None, "file", reason)
            continue
        if identity is not None:
            given[identity] = source
        yield path, source


def _file_identity(path: str | Path) -> tuple[int, int] | None:
    """What every spelling of one file shares; None when it cannot be read (the reader
    then says why)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


# Validation: one parsed object -> a Rollout or problems; cross-line checks in _Batch


class _Batch:
    """Validates records one at a time, remembering ids and tasks across lines and files."""

    def __init__(self, errors: ErrorLog, pass_threshold: float) -> None:
        self.errors = errors
        self.pass_threshold = pass_threshold
        self.first_seen: dict[tuple[str, str], tuple[str, int | None]] = {}
        self.tasks: dict[str, tuple[str, str, int | None]] = {}  # group_id -> digest, source, line
        self.group_sizes: dict[str, int] = {}
        self.max_group_size = errors.limits.group_size

    def validate(self, record: dict, source: str, line: int | None, suspicious: bool) -> Rollout | None:
        check = _Check(record, self.pass_threshold)
        try:
            rollout = check.rollout(source, line)
            self._cross_check(check, source, line)
            if suspicious or check.unencodable:
                check.report_unencodable()
        except RecursionError:
            self.errors.add(source, line, "line", "nested too deeply")
            return None
        for field, reason in check.problems:
            self.errors.add(source, line, field, reason)
        return None if check.problems or check.refused else rollout

    def _cross_check(self, check: _Check, source: str, line: int | None) -> None:
        group_id, trajectory_id = check.group_id, check.trajectory_id
        if group_id is None:
            return
        if trajectory_id is not None:
            first = self.first_seen.setdefault((group_id, trajectory_id), (source, line))
            if first != (source, line):
                check.bad(
                    "trajectory_id",
                    f"{trajectory_id!r} of group {group_id!r} already appeared at {_where(*first)}",
                )
            else:
                size = self.group_sizes[group_id] = self.group_sizes.get(group_id, 0) + 1
                if size > self.max_group_size:
                    if size == self.max_group_size + 1:  # said once per group
                        check.bad("group_id", f"group {group_id!r} has more than {self.max_group_size} "
                                              "trajectories, the most one group may have")
                    else:
                        check.refused = True
        if check.task_digest is not None:
            digest, *first = self.tasks.setdefault(group_id, (check.task_digest, source, line))
            if digest != check.task_digest:
                check.bad(
                    "task",
                    f"differs from the task of group {group_id!r} given at {_where(*first)}",
                )


def _where(source: str, line: int | None) -> str:
    return source if line is None else f"{source}:{line}"


class _Check:
    """Checks the fields of one record, collecting ``(field, reason)`` problems."""

    def __init__(self, record: dict, pass_threshold: float) -> None:
        self.record = record
        self.pass_threshold = pass_threshold
        self.problems: list[tuple[str, str]] = []
        self.group_id: str | None = None
        self.trajectory_id: str | None = None
        self.task_digest: str | None = None
        self.unencodable = False
        self.refused = False  # invalid, with the reason said before (a group's extra trajectories)

    def bad(self, field: str, reason: str) -> None:
        self.problems.append((field, reason))

    def rollout(self, source: str, line: int | None) -> Rollout | None:
        record = self.record
        self.group_id = self.identifier(record, "group_id", "group_id", required=True)
        self.trajectory_id = self.identifier(
            record, "trajectory_id", "trajectory_id", required=True
        )
        reward = self.reward()
        patch = self.text(record, "patch", "patch", required=True)
        passed = record.get("passed")
        if passed is None:
            passed = reward is not None and reward >= self.pass_threshold
        elif not isinstance(passed, bool):
            self.bad("passed", f"must be true or false, got {json_kind(passed)}")
        task, task_content = self.task(), None
        if task is not None:
            task_content = _task_content(task)
            self.task_digest = self.digest(task_content)
        messages = self.messages()
        tests = self.tests()
        metrics = self.mapping(record, "metrics", "metrics") or {}
        for key in _COUNT_METRICS:
            value = metrics.get(key)
            if value is not None and (type(value) is not int or value < 0):
                self.bad(f"metrics.{key}", f"must be a non-negative integer, got {json_kind(value)}")
        meta = self.meta()
        if self.problems:
            return None
        fields = dict(
            group_id=self.group_id,
            trajectory_id=self.trajectory_id,
            reward=reward,
            passed=passed,
            patch=patch,
            messages=messages,
            tests=tests,
            metrics=metrics,
            meta=meta,
        )
        content_hash = self.digest({**fields, "task": task_content})
        if content_hash is None:
            return None
        return Rollout(**fields, task=task, source=source, line=line, content_hash=content_hash)

    def digest(self, content: dict) -> str | None:
        """sha256 of canonical JSON; None (reported later) if some value has no JSON form."""
        try:
            return hashlib.sha256(json_bytes(content, sort_keys=True)).hexdigest()
        except ValueError:  # an unpaired surrogate (UnicodeEncodeError)
            self.unencodable = True
            return None

    def report_unencodable(self) -> None:
        reported = {field for field, _ in self.problems}
        for field, reason in _unencodable(self.record, ""):
            if field not in reported:
                self.bad(field, reason)

    def text(self, obj: dict, key: str, path: str, *, required: bool) -> str | None:
        value = obj.get(key)
        if value is None and required:
            self.bad(path, "missing (required)" if key not in obj else "must be a string, got null")
        elif value is not None and not isinstance(value, str):
            self.bad(path, f"must be a string, got {json_kind(value)}")
            return None
        return value

    def short_text(self, obj: dict, key: str, path: str, most: int) -> str | None:
        """An optional string of at most ``most`` characters: a database column's length."""
        value = self.text(obj, key, path, required=False)
        if value is not None and len(value) > most:
            self.bad(path, f"is {len(value)} characters long, over the limit of {most}")
            return None
        return value

    def identifier(self, obj: dict, key: str, path: str, *, required: bool) -> str | None:
        value = self.text(obj, key, path, required=required)
        if value is None:
            return None
        if not value:
            self.bad(path, "must not be empty")
        elif len(value) > MAX_ID_CHARS:
            self.bad(path, f"is {len(value)} characters long, over the limit of {MAX_ID_CHARS}")
        elif CONTROL_CHARACTERS.search(value):
            self.bad(path, "must not contain control characters")
        else:
            return value
        return None

    def mapping(self, obj: dict, key: str, path: str) -> dict | None:
        value = obj.get(key)
        if value is None or isinstance(value, dict):
            return value
        self.bad(path, f"must be an object, got {json_kind(value)}")
        return None

    def array(self, obj: dict, key: str, path: str, item: type, item_kind: str) -> list | None:
        value = obj.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            self.bad(path, f"must be an array, got {json_kind(value)}")
            return None
        for index, element in enumerate(value):
            if not isinstance(element, item):
                self.bad(f"{path}[{index}]", f"must be {item_kind}, got {json_kind(element)}")
        return value

    def reward(self) -> float | None:
        if "reward" not in self.record:
            self.bad("reward", "missing (required)")
            return None
        value = self.record["reward"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.bad("reward", f"must be a number, got {json_kind(value)}")
            return None
        try:
            reward = float(value)
        except OverflowError:  # an integer beyond the float range
            self.bad("reward", f"{json_kind(value)} is out of range for a float")
            return None
        if not math.isfinite(reward):
            self.bad("reward", _non_finite(value))
            return None
        return reward

    def task(self) -> TaskInfo | None:
        task = self.mapping(self.record, "task", "task")
        if task is None:
            return None
        before = len(self.problems)
        task_id = self.identifier(task, "id", "task.id", required=False) or self.group_id
        statement = self.text(task, "statement", "task.statement", required=True)
        repo, base_commit = (
            self.short_text(task, key, f"task.{key}", most) or ""
            for key, most in (("repo", MAX_REPO_CHARS), ("base_commit", MAX_BASE_COMMIT_CHARS))
        )
        reference_patch = self.text(task, "reference_patch", "task.reference_patch", required=False)
        if len(self.problems) > before or task_id is None:
            return None
        extra = {key: value for key, value in task.items() if key not in _TASK_KEYS}
        if not self.execution(extra):
            return None
        return TaskInfo(task_id, statement, repo, base_commit, reference_patch, extra)

    def execution(self, task: dict) -> bool:
        """Check the keys that say how to run the task's code; False if any is wrong."""
        before = len(self.problems)
        snapshot = self.short_text(task, "snapshot", "task.snapshot", _SNAPSHOT_CHARS)
        if snapshot is not None and (not snapshot or snapshot.startswith("/") or ".." in snapshot.split("/")):
            self.bad("task.snapshot", "must be a path inside the codebase store: not empty, not absolute, no '..'")
        self.text(task, "test_patch", "task.test_patch", required=False)
        self.array(task, "reward_tests", "task.reward_tests", str, "a string")
        environment = task.get("environment")
        if environment is not None:
            try:
                Environment.from_dict(environment)
            except ValueError as error:
                field, _, reason = str(error).partition(": ")
                self.bad(f"task.{field}", reason)
        return len(self.problems) == before

    def messages(self) -> list[dict] | None:
        messages = self.record.get("messages")
        if messages is not None and not isinstance(messages, list):
            self.bad("messages", f"must be an array, got {json_kind(messages)}")
            return None
        for index, message in enumerate(messages or ()):
            path = f"messages[{index}]"
            if not isinstance(message, dict):
                self.bad(path, f"must be an object, got {json_kind(message)}")
                continue
            self.text(message, "role", f"{path}.role", required=True)
            content = message.get("content")
            if isinstance(content, list):
                self.array(message, "content", f"{path}.content", dict, "an object")
            elif content is not None and not isinstance(content, str):
                reason = f"must be a string, null or an array of parts, got {json_kind(content)}"
                self.bad(f"{path}.content", reason)
            self.array(message, "tool_calls", f"{path}.tool_calls", dict, "an object")
            self.text(message, "tool_call_id", f"{path}.tool_call_id", required=False)
            self.text(message, "name", f"{path}.name", required=False)
        return messages

    def tests(self) -> dict | None:
        tests = self.mapping(self.record, "tests", "tests")
        if tests is not None:
            self.array(tests, "passed", "tests.passed", str, "a string")
            self.array(tests, "failed", "tests.failed", str, "a string")
            self.text(tests, "log", "tests.log", required=False)
        return tests

    def meta(self) -> dict:
        """``meta``, with the record's unknown top-level keys added under their own names."""
        meta = dict(self.mapping(self.record, "meta", "meta") or {})
        for key, value in self.record.items():
            if key in _TOP_LEVEL:
                continue
            if key in meta:
                self.bad(key, f"unknown key clashes with meta.{key}")
            else:
                meta[key] = value
        return meta


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unencodable(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """``(field, reason)`` for each value or key we cannot store: NaN, ±Infinity, numbers
    beyond the float range, unpaired surrogate escapes (valid JSON, but not UTF-8) and NUL
    characters (PostgreSQL text and jsonb)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path, _non_finite(value)
    elif isinstance(value, str) and not value.isascii() and _SURROGATE.search(value):
        yield path, "contains an unpaired surrogate escape"
    elif isinstance(value, str) and "\x00" in value:
        yield path, "contains a NUL character (\\u0000), which the database cannot store"
    elif isinstance(value, dict):
        for key, element in value.items():
            field = f"{path}.{key}" if path else key
            if _SURROGATE.search(key):
                yield field, "name contains an unpaired surrogate escape"
            if "\x00" in key:
                yield field, "name contains a NUL character (\\u0000), which the database cannot store"
            yield from _unencodable(element, field)
    elif isinstance(value, list):
        for index, element in enumerate(value):
            yield from _unencodable(element, f"{path}[{index}]")


def _non_finite(value: float) -> str:
    if isinstance(value, OutOfRangeFloat):
        return f"{json_kind(value)} is out of range for a float"
    return f"must be a finite number, got {json_kind(value)}"
