"""Transcripts (OpenAI chat messages) as pages of turns, with caps.

A transcript may be 20 MB or 10,000 turns. A page shows TURNS_PER_PAGE
turns; each part of a turn (its content, each tool call's arguments) shows
its first PREVIEW_CHARS characters / PREVIEW_LINES lines and a "show all"
that pages through the rest PART_CHUNK characters at a time.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from webapp.html.text import highlight_matches

TURNS_PER_PAGE = 100
PREVIEW_CHARS = 2000
PREVIEW_LINES = 40
PART_CHUNK = 256 * 1024
SNIPPET_BEFORE = 300  # characters shown before a search match in a preview
KNOWN_ROLES = frozenset({"system", "user", "assistant", "tool", "function", "developer"})
_PARSE_ARGS_LIMIT = 2 * 1024 * 1024


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: [{"type": "text", "text": ...}, ...]
        out = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                out.append(json.dumps(part, ensure_ascii=False, indent=2))
        return "\n".join(out)
    return json.dumps(value, ensure_ascii=False, indent=2)


def pretty_arguments(arguments) -> str:
    """Tool-call arguments as indented JSON when they are JSON, else as given. A string value
    of several lines (the code an agent writes, a diff, a script) is shown as its lines between
    triple quotes, not as one line of "\\n" escapes, so that an edit reads as code
    (tests/webapp/review/test_transcripts.py shows one).
    """
    if isinstance(arguments, str):
        if len(arguments) > _PARSE_ARGS_LIMIT:
            return arguments
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    blocks: dict[str, str] = {}
    marker = secrets.token_hex(8)  # no argument can spell it by chance

    def lift(value):
        if isinstance(value, str) and "\n" in value:
            key = f"{marker}-{len(blocks)}"
            blocks[json.dumps(key)] = f'"""\n{value}\n"""'
            return key
        if isinstance(value, dict):
            return {k: lift(v) for k, v in value.items()}
        if isinstance(value, list):
            return [lift(v) for v in value]
        return value

    text = json.dumps(lift(arguments), ensure_ascii=False, indent=2)
    for quoted, block in blocks.items():
        text = text.replace(quoted, block, 1)
    return text


def message_parts(message) -> list[tuple[str, str, str]]:
    """(kind, title, text) for each part of a message: its content, then each tool call."""
    if not isinstance(message, dict):
        return [("content", "", _text(message))]
    parts = [("content", "", _text(message.get("content")))]
    for key in ("reasoning_content", "reasoning"):
        if isinstance(message.get(key), str) and message[key]:
            parts.insert(0, ("reasoning", key, message[key]))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            name = _text(function.get("name"))
            parts.append(("call", name, pretty_arguments(function.get("arguments", ""))))
        else:
            parts.append(("call", "", _text(call)))
    return parts


@dataclass
class Part:
    index: int
    kind: str
    title: str
    html: str  # safe: escaped preview
    size: int
    hidden: int  # characters not in the preview

    @property
    def is_empty(self) -> bool:
        return self.size == 0


@dataclass
class Turn:
    index: int
    role: str
    role_class: str
    name: str
    tool_call_id: str
    summary: str
    parts: list[Part]

    @property
    def calls(self) -> list[str]:
        return [p.title for p in self.parts if p.kind == "call"]


def _preview(text: str, query: str) -> tuple[str, int]:
    start = 0
    if query:
        found = text.casefold().find(query.casefold())
        if found > SNIPPET_BEFORE:
            start = text.rfind("\n", 0, found - SNIPPET_BEFORE) + 1 or found - SNIPPET_BEFORE
    end = min(len(text), start + PREVIEW_CHARS)
    newline = start
    for _ in range(PREVIEW_LINES):
        newline = text.find("\n", newline + 1, end)
        if newline < 0:
            break
    else:
        end = newline
    shown = text[start:end]
    html = highlight_matches(shown, query)
    if start:
        html = f'<span class="cut">… {start} characters before</span>\n' + html
    return html, len(text) - len(shown)


def _summary(parts: list[tuple[str, str, str]]) -> str:
    for kind, _, text in parts:
        if kind == "content" and text.strip():
            line = " ".join(text[:300].split())
            return line[:140] + ("…" if len(line) > 140 else "")
    return ""


def make_turn(index: int, message, query: str = "") -> Turn:
    raw = message_parts(message)
    parts = []
    for i, (kind, title, text) in enumerate(raw):
        if kind == "content" and not text and len(raw) > 1:
            continue
        html, hidden = _preview(text, query)
        parts.append(Part(index=i, kind=kind, title=title, html=html, size=len(text), hidden=hidden))
    m = message if isinstance(message, dict) else {}
    role = _text(m.get("role")) or "?"
    return Turn(
        index=index, role=role, role_class=role if role in KNOWN_ROLES else "other",
        name=_text(m.get("name")), tool_call_id=_text(m.get("tool_call_id")),
        summary=_summary(raw), parts=parts,
    )


def matches(message, query: str) -> bool:
    folded = query.casefold()
    return any(folded in text.casefold() for _, _, text in message_parts(message))


@dataclass
class TurnPage:
    turns: list[Turn]
    total: int
    matched: int | None  # turns matching the query, None without one
    next_start: int | None


def turn_page(total: int, messages: list, *, start: int = 0) -> TurnPage:
    """A page of turns from `messages`, the transcript's turns from `start` on."""
    page = [make_turn(start + i, m) for i, m in enumerate(messages)]
    end = start + len(messages)
    return TurnPage(page, total, None, end if end < total else None)


def search_page(messages, query: str, *, start: int = 0, size: int = TURNS_PER_PAGE) -> TurnPage:
    """A page of the turns from `start` on that contain `query` (any case)."""
    messages = messages if isinstance(messages, list) else [messages]
    hits = [i for i, m in enumerate(messages) if matches(m, query)]
    after = [i for i in hits if i >= start]
    page = [make_turn(i, messages[i], query) for i in after[:size]]
    return TurnPage(page, len(messages), len(hits), after[size] if len(after) > size else None)


def part_chunk(message, part: int, offset: int = 0, query: str = "") -> tuple[str, int | None] | None:
    """Safe HTML for characters offset..offset+PART_CHUNK of a part and the
    next offset (None at the end); None if there is no such part."""
    parts = message_parts(message)
    if not 0 <= part < len(parts):
        return None
    text = parts[part][2]
    offset = max(0, offset)
    end = offset + PART_CHUNK
    return highlight_matches(text[offset:end], query), (end if end < len(text) else None)
