"""OpenHands ``output.jsonl`` with its evaluation report: one group per instance, one
trajectory per run.

Each line is an ``EvalOutput`` (openhands/evaluation/utils/shared.py; written by
evaluation/benchmarks/swe_bench/run_infer.py): ``instance_id``, ``test_result.git_patch``,
``history`` (the event stream: actions with ``action``/``args``/``source``, observations
with ``observation``/``content``/``cause``; older outputs hold ``[action, observation]``
pairs), ``metrics`` (``accumulated_cost``, ...), ``instance`` (the SWE-bench instance:
the group's task) and ``error``. The report is what eval_infer.py writes next to it:
``output.swebench_eval.jsonl`` (a row per instance, its verdict in ``test_result.report``),
or the harness's run report, or the per-instance reports (``reports.py`` reads them all).

Each path is one run: an ``output.jsonl``, or the run folder that holds one; the
trajectory id is the run folder's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.files import Fields, json_items, task_from_instance
from grading.formats.reports import load_verdicts, reward_of
from grading.jsonl import ErrorLog, json_kind
from grading.rollouts import distinct_files

OUTPUT = "output.jsonl"


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    reports = dict(zip(map(str, inputs.paths), inputs.reports, strict=True))
    for path, source in distinct_files(inputs.paths, errors):
        verdicts = load_verdicts(reports[source], str(reports[source]), errors)
        if Path(path).is_dir():
            run, path, source = Path(path).resolve().name, Path(path) / OUTPUT, f"{source}/{OUTPUT}"
        else:
            run = Path(path).resolve().parent.name
        for where, line, item, suspicious in json_items(path, source, errors):
            record = _record(item, Fields(item, where, line, errors), run, verdicts, notes)
            if record is not None:
                yield where, line, record, suspicious


def _record(item: dict, fields: Fields, run: str, verdicts, notes: ImportNotes) -> dict | None:
    instance_id = fields.text("instance_id")
    test_result = fields.mapping("test_result")
    patch = None if test_result is None else fields.text(
        "git_patch", within=test_result, prefix="test_result.", required=False)
    history = fields.get("history", list, "an array")
    messages = [] if history is None else _messages(history, fields)
    metrics = fields.mapping("metrics", required=False) or {}
    cost = fields.number("accumulated_cost", within=metrics, prefix="metrics.", required=False)
    task = _task(fields)
    if not fields.ok:
        return None
    reward = reward_of(verdicts, instance_id, patch)
    if isinstance(reward, str):
        notes.skip(reward, f"{run}/{instance_id}")
        return None
    record = {"group_id": instance_id, "trajectory_id": run, "reward": reward, "patch": patch,
              "messages": messages,
              "metrics": {"num_turns": sum(m["role"] == "assistant" for m in messages),
                          **({} if cost is None else {"cost": cost})},
              "meta": {"error": item.get("error")}}
    if task is not None:
        record["task"] = task
    return record


def _task(fields: Fields) -> dict | None:
    instance = fields.mapping("instance", required=False)
    if instance is None:
        return None
    fields.text("problem_statement", within=instance, prefix="instance.")
    return task_from_instance(instance)


def _messages(history: list, fields: Fields) -> list[dict]:
    events = []
    for index, entry in enumerate(history):
        if isinstance(entry, list):  # an older output's [action, observation] pair
            events += [(f"history[{index}][{i}]", event) for i, event in enumerate(entry)]
        else:
            events.append((f"history[{index}]", entry))
    messages = []
    for where, event in events:
        if not isinstance(event, dict):
            fields.bad(where, f"must be an object, got {json_kind(event)}")
        elif "action" in event:
            messages.append(_action(event))
        elif "observation" in event:
            observation = {"role": "tool", "content": _text(event.get("content"))}
            if event.get("cause") is not None:
                observation["tool_call_id"] = str(event["cause"])
            messages.append(observation)
        else:
            fields.bad(where, "neither an action nor an observation")
    return messages


def _action(event: dict) -> dict:
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    said = _text(event.get("message") or args.get("content") or args.get("thought"))
    if event["action"] == "message":
        return {"role": "user" if event.get("source") == "user" else "assistant", "content": said}
    arguments = orjson.dumps(args, default=str).decode()
    return {"role": "assistant", "content": said, "tool_calls": [
        {"id": str(event.get("id")), "type": "function",
         "function": {"name": str(event["action"]), "arguments": arguments}}]}


def _text(value) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)
