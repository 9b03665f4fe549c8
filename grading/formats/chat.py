"""Transcripts as agents write them, read into the rollout format's ``messages`` (the
OpenAI chat format): chat messages whatever extra keys a tool adds to them, and the
items of OpenAI's Responses API, which mini-swe-agent v2 stores when a model uses it."""

from __future__ import annotations

from grading.formats.files import Fields
from grading.jsonl import json_kind

_KEPT = ("content", "tool_calls", "tool_call_id", "name")


def chat_message(message: dict, where: str, fields: Fields) -> dict | None:
    """A chat message with only the rollout format's keys: ``role`` (required), ``content``
    (a string or a list of parts), ``tool_calls``, ``tool_call_id`` and ``name``; a null
    ``tool_calls`` is left out, and SWE-agent's ``tool_call_ids`` (a list of one) is the
    ``tool_call_id``."""
    role = fields.text("role", within=message, prefix=f"{where}.")
    if role is None:
        return None
    chat = {"role": role}
    chat.update((key, message[key]) for key in _KEPT if message.get(key) is not None)
    ids = message.get("tool_call_ids")
    if "tool_call_id" not in chat and isinstance(ids, list) and ids and isinstance(ids[0], str):
        chat["tool_call_id"] = ids[0]
    return chat


def responses_item(item: dict, where: str, fields: Fields) -> dict | None:
    """A Responses API item as a chat message: a whole response (``"object": "response"``)
    is the assistant's turn, its text and its function calls; a ``function_call_output``
    answers a call as a ``tool`` message; a ``message`` item keeps its role. Reasoning items
    are left out (their text is mostly encrypted)."""
    if item.get("object") == "response":
        output = fields.get("output", list, "an array", within=item, prefix=f"{where}.")
        return None if output is None else _response_turn(output, f"{where}.output", fields)
    kind = item.get("type")
    if kind == "function_call_output":
        call_id = fields.text("call_id", within=item, prefix=f"{where}.")
        output = item.get("output")
        return {"role": "tool", "content": output if isinstance(output, (str, list)) else text_of(output),
                "tool_call_id": call_id}
    if kind == "message":
        return chat_message(item, where, fields)
    fields.bad(where, "neither a chat message (no role) nor a Responses API item "
                      f"(type {json_kind(kind) if not isinstance(kind, str) else repr(kind)})")
    return None


def _response_turn(output: list, where: str, fields: Fields) -> dict:
    parts, calls = [], []
    for index, item in enumerate(output):
        if not isinstance(item, dict):
            fields.bad(f"{where}[{index}]", f"must be an object, got {json_kind(item)}")
        elif item.get("type") == "message":
            content = item.get("content")
            parts += [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        elif item.get("type") == "function_call":
            calls.append({"id": text_of(item.get("call_id") or item.get("id")), "type": "function",
                          "function": {"name": text_of(item.get("name")), "arguments": text_of(item.get("arguments"))}})
    turn = {"role": "assistant", "content": parts}
    if calls:
        turn["tool_calls"] = calls
    return turn


def text_of(value) -> str:
    """`value` as text: itself when a string, "" for null, else its str()."""
    return value if isinstance(value, str) else "" if value is None else str(value)
