"""SWE-agent ``.traj`` files and mini-swe-agent's ``.traj.json``, with the run's evaluation
report: one group per instance, one trajectory per run.

SWE-agent (sweagent/agent/agents.py, ``save_trajectory``) writes
``{"trajectory": [{"thought", "action", "observation", "response", ...}], "history":
[...], "info": {"submission", "exit_status", "model_stats": {"instance_cost",
"api_calls", "tokens_sent", "tokens_received"}}}``; mini-swe-agent
(minisweagent/run/utils/save.py, ``save_traj``) writes ``{"info": {...the same...},
"messages": [...], "instance_id"?}``.

Each path is one run: a folder (every .traj and .traj.json below it) or one file; its
trajectory id is the run folder's name. The instance id is the file's ``instance_id`` or
else its name without the suffix. The transcript is the steps as tool calls and their
observations (SWE-agent) or the chat messages (mini-swe-agent); the submission is the patch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.files import Fields, TaskGiver, load_json
from grading.formats.reports import load_verdicts, reward_of
from grading.jsonl import ErrorLog, json_kind
from grading.rollouts import distinct_files

SUFFIXES = (".traj.json", ".traj")


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    tasks = TaskGiver(inputs.tasks, errors)
    for run_path, report in zip(inputs.paths, inputs.reports, strict=True):
        run_path = Path(run_path)
        run = run_path.name if run_path.is_dir() else run_path.resolve().parent.name
        verdicts = load_verdicts(report, str(report), errors)
        for path, source in distinct_files(_trajectory_files(run_path, errors), errors):
            yield from _trajectory(path, source, run, verdicts, tasks, errors, notes)


def _trajectory_files(run_path: Path, errors: ErrorLog) -> list[str]:
    if run_path.is_dir():  # os.walk, not Path.rglob: a run holds thousands of files
        files = sorted(os.path.join(folder, name) for folder, _, names in os.walk(run_path)
                       for name in names if name.endswith(SUFFIXES))
        if not files:
            errors.add(str(run_path), None, "file", "folder holds no .traj or .traj.json file")
        return files
    if not run_path.name.endswith(SUFFIXES):
        errors.add(str(run_path), None, "file", "name must end in .traj or .traj.json (or name a run folder)")
        return []
    return [str(run_path)]


def _trajectory(path, source, run, verdicts, tasks, errors, notes) -> Iterator[Record]:
    loaded = load_json(path, source, errors)
    if loaded is None:
        return
    data, suspicious = loaded
    if not isinstance(data, dict):
        errors.add(source, None, "file", f"must be a JSON object, got {json_kind(data)}")
        return
    fields = Fields(data, source, None, errors)
    name = os.path.basename(path)
    instance_id = fields.text("instance_id", required=False) or name.removesuffix(".json").removesuffix(".traj")
    info = fields.mapping("info")
    if info is None:
        return
    if "submission" not in info:
        fields.bad("info.submission", "missing")
        return
    submission = fields.text("submission", within=info, prefix="info.", required=False)
    messages = _messages(data, fields)
    metrics = _metrics(info, fields, data)
    if not fields.ok:
        return
    reward = reward_of(verdicts, instance_id, submission)
    if isinstance(reward, str):
        notes.skip(reward, f"{run}/{instance_id}")
        return
    record = {"group_id": instance_id, "trajectory_id": run, "reward": reward, "patch": submission,
              "messages": messages, "metrics": metrics,
              "meta": {"exit_status": info.get("exit_status")}}
    tasks.add_to(record, instance_id, source, None)
    yield source, None, record, suspicious


def _messages(data: dict, fields: Fields) -> list[dict] | None:
    if "trajectory" in data:
        steps = fields.get("trajectory", list, "an array")
        return None if steps is None else _steps_as_messages(steps, fields)
    if "messages" in data:
        messages = fields.get("messages", list, "an array")
        return None if messages is None else _chat(messages, fields)
    fields.bad("trajectory", "missing (a SWE-agent .traj has `trajectory`, a mini-swe-agent one `messages`)")
    return None


def _steps_as_messages(steps: list, fields: Fields) -> list[dict]:
    """Each step as the model's turn (its thought, the action as a tool call) and the
    observation that answered it."""
    messages = []
    for index, step in enumerate(steps):
        prefix = f"trajectory[{index}]."
        if not isinstance(step, dict):
            fields.bad(prefix.rstrip("."), f"must be an object, got {json_kind(step)}")
            continue
        action = fields.text("action", within=step, prefix=prefix)
        thought = fields.text("thought", within=step, prefix=prefix, required=False)
        observation = fields.text("observation", within=step, prefix=prefix, required=False)
        if action is None:
            continue
        call_id = f"step-{index}"
        messages.append({"role": "assistant", "content": thought or "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "action", "arguments": action}}]})
        messages.append({"role": "tool", "content": observation or "", "tool_call_id": call_id})
    return messages


def _chat(messages: list, fields: Fields) -> list[dict]:
    chat = []
    for index, message in enumerate(messages):
        prefix = f"messages[{index}]."
        if not isinstance(message, dict):
            fields.bad(prefix.rstrip("."), f"must be an object, got {json_kind(message)}")
            continue
        role = fields.text("role", within=message, prefix=prefix)
        if role is None:
            continue
        kept = {key: message[key] for key in ("content", "tool_calls", "tool_call_id") if key in message}
        chat.append({"role": role, **kept})
    return chat


def _metrics(info: dict, fields: Fields, data: dict) -> dict:
    """cost and steps; calls and tokens as the rollout format's counts."""
    stats = fields.mapping("model_stats", within=info, prefix="info.", required=False) or {}
    metrics = {}
    cost = fields.number("instance_cost", within=stats, prefix="info.model_stats.", required=False)
    if cost is not None:
        metrics["cost"] = cost
    for key, name in (("api_calls", "num_turns"), ("tokens_sent", "input_tokens"),
                      ("tokens_received", "output_tokens")):
        value = fields.get(key, int, "an integer", within=stats, prefix="info.model_stats.", required=False)
        if value is not None:
            metrics[name] = value
    if isinstance(data.get("trajectory"), list):
        metrics["steps"] = len(data["trajectory"])
    return metrics
