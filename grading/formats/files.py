"""What the adapters share: whole JSON files, JSON-or-JSONL item files, field checks and
SWE-bench task files."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from grading.jsonl import ErrorLog, Reason, json_kind, open_file, parse_json, read_json_lines
from grading.limits import size_in_words
from grading.rollouts import distinct_files

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")


def load_json(path: str | Path, source: str, errors: ErrorLog) -> tuple[Any, bool] | None:
    """A whole JSON file's value and whether it may hold values the database cannot store
    (NaN, a NUL escape); None, with the reason in ``errors``, when it cannot be read. A
    whole file is held in memory, so it has the size limit of one line
    (``errors.limits.line_bytes``), and its bytes count against the import's."""
    file = open_file(path, source, errors)
    if file is None:
        return None
    limit = errors.limits.line_bytes
    with file:
        size = os.fstat(file.fileno()).st_size
        data = file.read(size + 1) if size <= limit else b""  # one more: a file that grew is seen
    if size > limit or len(data) > limit:
        errors.add(source, None, "file", f"is {max(size, len(data))} bytes, over the limit of {size_in_words(limit)} "
                   "for one JSON file (a file of many items can be JSON Lines, where the limit is per line)")
        return None
    errors.read(source, None, len(data))
    value, suspicious = parse_json(data)
    if isinstance(value, Reason):
        errors.add(source, value.line, "file", value)
        return None
    return value, suspicious


def inside(folder: str | Path, path: str | Path, source: str, errors: ErrorLog, *, what: str) -> bool:
    """Whether ``path``, found in ``folder``, is in it once links are followed: a link that
    leaves it (to another user's files, say) is an error. ``what`` names the folder."""
    base, real = os.path.realpath(folder), os.path.realpath(path)
    if os.path.commonpath([base, real]) == base:
        return True
    errors.add(source, None, "file", f"is a link to a file outside the {what} folder {folder}; refused")
    return False


def json_items(path: str | Path, source: str, errors: ErrorLog) -> Iterator[tuple[str, int | None, Any, bool]]:
    """``(source, line, item, suspicious)`` for each item of a file that is JSON Lines
    (by its name) or one JSON array or object of items: an array's item is named
    ``file[3]``, an object's ``file[key]``, with no line."""
    if str(path).lower().endswith(JSONL_SUFFIXES):
        for line, item, suspicious in read_json_lines(Path(path), source, errors):
            yield source, line, item, suspicious
        return
    if not str(path).lower().endswith(".json"):
        errors.add(source, None, "file", "name must end in .json (one JSON value) or .jsonl (JSON Lines)")
        return
    loaded = load_json(path, source, errors)
    if loaded is None:
        return
    value, suspicious = loaded
    if isinstance(value, list):
        items = ((f"{source}[{i}]", item) for i, item in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"{source}[{key}]", item) for key, item in value.items())
    else:
        errors.add(source, None, "file", f"must be a JSON array or object of items, got {json_kind(value)}")
        return
    for where, item in items:
        if not isinstance(item, dict):
            errors.add(where, None, "item", f"must be an object, got {json_kind(item)}")
            continue
        yield where, None, item, suspicious


def json_text(value: Any, where: str, fields: Fields) -> str:
    """``value`` as compact JSON text (a tool call's arguments, as the chat format has them).
    Integers beyond 64 bits and nesting deeper than orjson writes are written by json; a
    value with no JSON text (an unpaired surrogate, nesting too deep even for json) is an
    error at ``where``, and "" stands for it."""
    try:
        return orjson.dumps(value, default=str).decode()
    except orjson.JSONEncodeError:
        pass
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
        text.encode("utf-8")
    except UnicodeEncodeError:
        fields.bad(where, "contains an unpaired surrogate escape")
        return ""
    except RecursionError:
        fields.bad(where, "nested too deeply")
        return ""
    return text


class Fields:
    """Reads the fields of one item, reporting each problem by its source, line and key."""

    def __init__(self, item: dict, source: str, line: int | None, errors: ErrorLog) -> None:
        self.item, self.source, self.line, self.errors = item, source, line, errors
        self.ok = True

    def bad(self, key: str, reason: str) -> None:
        self.ok = False
        self.errors.add(self.source, self.line, key, reason)

    def get(self, key: str, kind: type | tuple, kind_name: str, *, required: bool = True,
            within: dict | None = None, prefix: str = "") -> Any:
        """``key`` of the item (or of ``within``, named ``prefix + key``) if it has ``kind``;
        None, reported when ``required`` or of the wrong kind, otherwise."""
        obj = self.item if within is None else within
        name = prefix + key
        if key not in obj:
            if required:
                self.bad(name, "missing")
            return None
        value = obj[key]
        if value is None and not required:
            return None
        if (isinstance(value, bool) and bool not in _as_tuple(kind)) or not isinstance(value, kind):
            self.bad(name, f"must be {kind_name}, got {json_kind(value)}")
            return None
        return value

    def text(self, key: str, **options) -> str | None:
        return self.get(key, str, "a string", **options)

    def number(self, key: str, **options) -> float | None:
        value = self.get(key, (int, float), "a number", **options)
        if value is not None and not math.isfinite(value):
            self.bad(options.get("prefix", "") + key, f"must be a finite number, got {json_kind(value)}")
            return None
        return value

    def mapping(self, key: str, **options) -> dict | None:
        return self.get(key, dict, "an object", **options)


def _as_tuple(kind: type | tuple) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


# SWE-bench task files: the dataset's instances (princeton-nlp/SWE-bench and its splits),
# as a JSON array or JSON Lines.
_TASK_FIELDS = {"instance_id": "id", "problem_statement": "statement", "repo": "repo",
                "base_commit": "base_commit", "patch": "reference_patch"}


def load_tasks(paths, errors: ErrorLog) -> dict[str, dict]:
    """instance_id -> the rollout format's ``task`` object, from SWE-bench task files; other
    keys of an instance (test_patch, FAIL_TO_PASS, ...) are kept in the task."""
    tasks: dict[str, dict] = {}
    for path, source in distinct_files(paths, errors):
        for where, line, item, _ in json_items(path, source, errors):
            fields = Fields(item, where, line, errors)
            instance_id = fields.text("instance_id")
            fields.text("problem_statement")
            for key in ("repo", "base_commit", "patch"):
                fields.text(key, required=False)
            if not fields.ok:
                continue
            tasks[instance_id] = task_from_instance(item)
    return tasks


def task_from_instance(item: dict) -> dict:
    """A SWE-bench instance (its instance_id and problem_statement checked by the caller) as
    the rollout format's ``task``."""
    return {_TASK_FIELDS.get(key, key): value for key, value in item.items()}


class TaskGiver:
    """Gives each group its task once, on its first trajectory, from the task file if one was
    given; an instance the file lacks is an error, since the user asked for tasks."""

    def __init__(self, task_files: Sequence[str | Path], errors: ErrorLog) -> None:
        self.tasks = load_tasks(task_files, errors)
        self.task_file = str(task_files[0]) if task_files else None
        self.errors = errors
        self.given: set[str] = set()

    def add_to(self, record: dict, instance_id: str, source: str, line: int | None) -> None:
        if self.task_file is None or instance_id in self.given:
            return
        task = self.tasks.get(instance_id)
        if task is None:
            self.errors.add(source, line, "instance_id", f"{instance_id!r} is not in the task file {self.task_file}")
            return
        record["task"] = task
        self.given.add(instance_id)
