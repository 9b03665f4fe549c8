"""OpenHands ``output.jsonl`` with its evaluation report: one group per instance, one
trajectory per run.

Each line is an ``EvalOutput``: ``instance_id``, ``test_result.git_patch``, ``history``,
``metrics`` (``accumulated_cost``, ``accumulated_token_usage``), ``instance`` (the
SWE-bench instance: the group's task) and ``error``. Three generations write it:

- OpenDevin and OpenHands before 0.9 (evaluation/swe_bench/run_infer.py): ``git_patch``
  and ``swe_instance`` at the top level, history as ``[action, observation]`` pairs;
- OpenHands 0.9 and later (evaluation/benchmarks/swe_bench/run_infer.py,
  evaluation/utils/shared.py): the event stream, actions with ``action``/``args``/``source``,
  observations with ``observation``/``content``/``cause``;
- OpenHands V1 (the OpenHands/benchmarks repository on the software-agent-sdk): events
  told apart by ``kind``: ``SystemPromptEvent``, ``MessageEvent`` (``llm_message``),
  ``ActionEvent`` (``thought``, ``tool_name``, ``tool_call_id``, ``tool_call``),
  ``ObservationEvent`` (``observation.content``), ``AgentErrorEvent``,
  ``UserRejectObservation``; other kinds (condensation, pauses, state updates) are not
  turns of the transcript and are left out, as are the null and agent-state events of
  the older generations.

A ``history`` or ``metrics`` of null (an instance that failed) is no transcript or no
metrics. The report is what evaluating the run wrote next to it (``reports.py`` reads
them all): ``output.swebench_eval.jsonl``, the harness's run report (``report.json``,
V1's ``output.report.json``), the per-instance reports of ``eval_outputs/``, or the
``output.jsonl`` itself once ``update_output_with_eval.py`` gave each row its ``report``.

Each path is one run: an ``output.jsonl``, or the run folder that holds one; the
trajectory id is the run folder's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.chat import text_of
from grading.formats.files import Fields, inside, json_items, json_text, task_from_instance
from grading.formats.reports import load_verdicts, reward_of
from grading.jsonl import ErrorLog, json_kind
from grading.rollouts import distinct_files

OUTPUT = "output.jsonl"
_BOOKKEEPING = {"null", "change_agent_state", "agent_state_changed"}  # actions and observations


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    reports = dict(zip(map(str, inputs.paths), inputs.reports, strict=True))
    for path, source in distinct_files(inputs.paths, errors):
        verdicts = load_verdicts(reports[source], str(reports[source]), errors)
        if Path(path).is_dir():
            folder = path
            run, path, source = Path(path).resolve().name, Path(path) / OUTPUT, f"{source}/{OUTPUT}"
            if not inside(folder, path, source, errors, what="run"):
                continue
        else:
            run = Path(path).resolve().parent.name
        for where, line, item, suspicious in json_items(path, source, errors):
            record = _record(item, Fields(item, where, line, errors), run, verdicts, notes)
            if record is not None:
                yield where, line, record, suspicious


def _record(item: dict, fields: Fields, run: str, verdicts, notes: ImportNotes) -> dict | None:
    instance_id = fields.text("instance_id")
    patch = _patch(item, fields)
    history = fields.get("history", list, "an array", required=False)
    messages = None if history is None else _messages(history, fields)
    metrics = _metrics(fields)
    task = _task(fields)
    if not fields.ok:
        return None
    reward = reward_of(verdicts, instance_id, patch)
    if isinstance(reward, str):
        notes.skip(reward, f"{run}/{instance_id}")
        return None
    if messages is not None:
        metrics["num_turns"] = sum(m["role"] == "assistant" for m in messages)
    record = {"group_id": instance_id, "trajectory_id": run, "reward": reward, "patch": patch,
              "messages": messages, "metrics": metrics, "meta": {"error": item.get("error")}}
    if task is not None:
        record["task"] = task
    return record


def _patch(item: dict, fields: Fields) -> str | None:
    """``test_result.git_patch``, or the older top-level ``git_patch``; None when there is
    none (an instance that failed before its patch was taken)."""
    test_result = item.get("test_result")
    if isinstance(test_result, dict) and "git_patch" in test_result:
        return fields.text("git_patch", within=test_result, prefix="test_result.", required=False)
    if "git_patch" in item:  # before 0.9
        return fields.text("git_patch", required=False)
    fields.mapping("test_result")  # reported when missing or not an object
    return None


def _metrics(fields: Fields) -> dict:
    metrics = fields.mapping("metrics", required=False) or {}
    out = {}
    cost = fields.number("accumulated_cost", within=metrics, prefix="metrics.", required=False)
    if cost is not None:
        out["cost"] = cost
    usage = fields.mapping("accumulated_token_usage", within=metrics, prefix="metrics.", required=False) or {}
    for key, name in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        value = fields.get(key, int, "an integer", within=usage,
                           prefix="metrics.accumulated_token_usage.", required=False)
        if value is not None:
            out[name] = value
    return out


def _task(fields: Fields) -> dict | None:
    key = "instance" if "instance" in fields.item else "swe_instance"
    instance = fields.mapping(key, required=False)
    if instance is None:
        return None
    fields.text("problem_statement", within=instance, prefix=f"{key}.")
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
        elif "kind" in event:
            message = _sdk_event(event, where, fields)
            if message is not None:
                messages.append(message)
        elif "action" in event:
            if event["action"] not in _BOOKKEEPING:
                messages.append(_action(event, where, fields))
        elif "observation" in event:
            if event["observation"] not in _BOOKKEEPING:
                messages.append(_observation(event))
        else:
            fields.bad(where, "neither an action nor an observation")
    return messages


def _action(event: dict, where: str, fields: Fields) -> dict:
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    said = text_of(event.get("message") or args.get("content") or args.get("thought"))
    if event["action"] == "system":  # 0.3x: the system prompt, its tools in args
        return {"role": "system", "content": text_of(args.get("content"))}
    if event["action"] == "message":
        return {"role": "user" if event.get("source") == "user" else "assistant", "content": said}
    arguments = json_text(args, f"{where}.args", fields)
    return {"role": "assistant", "content": said, "tool_calls": [
        {"id": str(event.get("id")), "type": "function",
         "function": {"name": str(event["action"]), "arguments": arguments}}]}


def _observation(event: dict) -> dict:
    observation = {"role": "tool", "content": text_of(event.get("content"))}
    if event.get("cause") is not None:
        observation["tool_call_id"] = str(event["cause"])
    return observation


def _sdk_event(event: dict, where: str, fields: Fields) -> dict | None:
    """A V1 (software-agent-sdk) event as a chat message; None for events that are no turn."""
    kind = event["kind"]
    if kind == "SystemPromptEvent":
        return {"role": "system", "content": _parts(event.get("system_prompt"))}
    if kind == "MessageEvent":
        message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
        role = message.get("role") or ("user" if event.get("source") == "user" else "assistant")
        return {"role": text_of(role), "content": _parts(message.get("content"))}
    if kind == "ActionEvent":
        call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else {}
        arguments = call.get("arguments")
        if not isinstance(arguments, str):
            arguments = json_text(event.get("action"), f"{where}.action", fields)
        return {"role": "assistant", "content": _parts(event.get("thought")), "tool_calls": [
            {"id": text_of(event.get("tool_call_id")), "type": "function",
             "function": {"name": text_of(event.get("tool_name")), "arguments": arguments}}]}
    if kind == "ObservationEvent":
        observation = event.get("observation")
        content = _parts(observation.get("content") if isinstance(observation, dict) else observation)
    elif kind == "AgentErrorEvent":
        content = text_of(event.get("error"))
    elif kind == "UserRejectObservation":
        content = "Action rejected: " + text_of(event.get("rejection_reason"))
    else:
        return None
    return {"role": "tool", "content": content, "tool_call_id": text_of(event.get("tool_call_id"))}


def _parts(value) -> str | list:
    """SDK content: a string, one text part, or a list of parts, as the chat format's content."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [part for part in value if isinstance(part, dict)]
    return ""

