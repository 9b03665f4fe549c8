"""SWE-agent ``.traj`` files and mini-swe-agent's ``.traj.json``, with the run's evaluation
report: one group per instance, one trajectory per run.

SWE-agent writes ``{"trajectory": [{"action", "observation", "response", "thought", ...}],
"history": [chat messages], "info": {"submission", "exit_status", "model_stats":
{"instance_cost", "api_calls", "tokens_sent", "tokens_received"}, ...}, "environment"}``:
0.x (sweagent/agent/agents.py, ``save_trajectory``) as ``<run>/<instance>.traj``, its
``info`` without ``submission`` when the agent gave none; 1.x (``get_trajectory_data``) as
``<run>/<instance>/<instance>.traj``, its history with tool calls and ``tool`` messages
(``tool_call_ids``), and a RetryAgent's attempts again in ``<instance>/attempt_<n>/``.
mini-swe-agent (minisweagent/run/extra/swebench.py, ``save_traj``; v2: ``Agent.save``)
writes ``<run>/<instance>/<instance>.traj.json``: ``{"info": {...the same...},
"messages": [...], "instance_id", "trajectory_format"}``, its messages chat messages with
an ``extra`` key, or (v2 with the Responses API) Responses API items.

Each path is one run: a folder (every .traj and .traj.json below it, but those of
``attempt_<n>`` folders: the instance's own file holds the attempt it chose) or one file.
The trajectory id is the run folder's name: a folder's own, or for a file the folder above
its instance folder; a folder named ``trajs`` (the SWE-bench experiments layout,
``evaluation/<split>/<run>/trajs/``) stands for the run folder above it. The instance id is
the file's ``instance_id`` or else its name without the suffix. The transcript is the
history (demonstrations left out) or the messages; the submission is the patch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.chat import chat_message, responses_item
from grading.formats.files import Fields, TaskGiver, inside, load_json
from grading.formats.reports import load_verdicts, reward_of
from grading.jsonl import ErrorLog, json_kind
from grading.rollouts import distinct_files

SUFFIXES = (".traj.json", ".traj")
_ATTEMPT = re.compile(r"attempt_\d+")


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    tasks = TaskGiver(inputs.tasks, errors)
    for run_path, report in zip(inputs.paths, inputs.reports, strict=True):
        run_path = Path(run_path)
        verdicts = load_verdicts(report, str(report), errors)
        run = run_name(run_path)
        for path, source in distinct_files(_trajectory_files(run_path, errors), errors):
            yield from _trajectory(path, source, run, verdicts, tasks, errors, notes)


def run_name(run_path: Path) -> str:
    """The run a folder or a trajectory file belongs to (see the module's docstring)."""
    folder = run_path.resolve()
    if not run_path.is_dir():
        folder = folder.parent
        if folder.name == _instance_of_name(run_path.name):
            folder = folder.parent
    return folder.parent.name if folder.name == "trajs" else folder.name


def _instance_of_name(name: str) -> str:
    return name.removesuffix(".json").removesuffix(".traj")


def _trajectory_files(run_path: Path, errors: ErrorLog) -> list[str]:
    if run_path.is_dir():  # os.walk, not Path.rglob: a run holds thousands of files
        files = sorted(os.path.join(folder, name) for folder, _, names in os.walk(run_path)
                       if not _ATTEMPT.fullmatch(os.path.basename(folder))
                       for name in names if name.endswith(SUFFIXES))
        if not files:
            errors.add(str(run_path), None, "file", "folder holds no .traj or .traj.json file")
        return [file for file in files if inside(run_path, file, file, errors, what="run")]
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
    instance_id = fields.text("instance_id", required=False) or _instance_of_name(os.path.basename(path))
    info = fields.mapping("info")
    if info is None:
        return
    # SWE-agent 0.x leaves `submission` out when the agent submitted nothing
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
    if "history" in data:
        history = fields.get("history", list, "an array")
        return None if history is None else _chat(history, "history", fields)
    if "messages" in data:
        messages = fields.get("messages", list, "an array")
        return None if messages is None else _chat(messages, "messages", fields)
    fields.bad("history", "missing (a SWE-agent .traj has `history`, a mini-swe-agent one `messages`)")
    return None


def _chat(entries: list, key: str, fields: Fields) -> list[dict]:
    """The messages, demonstrations (SWE-agent's ``is_demo``) left out: they show the agent
    another task solved."""
    chat = []
    for index, entry in enumerate(entries):
        where = f"{key}[{index}]"
        if not isinstance(entry, dict):
            fields.bad(where, f"must be an object, got {json_kind(entry)}")
            continue
        if entry.get("is_demo") is True:
            continue
        responses = key == "messages" and "role" not in entry  # mini-swe-agent v2 on the Responses API
        message = responses_item(entry, where, fields) if responses else chat_message(entry, where, fields)
        if message is not None:
            chat.append(message)
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
