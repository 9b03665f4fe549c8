"""What bounds every tool of the grader agent's workspace (grading/workspace.py and its code
tools, grading/workspace_code.py): the caps on what one call returns and the code budget of a
conversation (`Caps`, `cap`), the arguments a call may pass (`text_argument`,
`number_argument`), and `ToolError`, a call refused, whose message goes back to the agent.
"""

from __future__ import annotations

from dataclasses import dataclass

# Far above any path, pattern or command a model writes (the action schema allows at most 300
# characters): a longer one is answered as an error before it reaches a system call,
# which would fail on it (a path past PATH_MAX, a command past the argument size).
MAX_ARGUMENT_CHARS = 4096


@dataclass(frozen=True)
class Caps:
    """Upper bounds, in characters or items, on what one tool call returns; and the code
    budget of one conversation: `code_runs` runs of run_tests and run together, and
    `code_seconds` of their time in the sandbox."""

    output_chars: int = 6000
    statement_chars: int = 4000
    turn_chars: int = 1200
    turns_per_view: int = 20
    search_hits: int = 30
    hit_chars: int = 200
    test_names: int = 20
    log_chars: int = 1500
    file_lines: int = 200
    code_runs: int = 5
    code_seconds: float = 60.0


class ToolError(ValueError):
    """A tool call the workspace cannot run; its message goes back to the agent."""


def text_argument(name: str, value) -> str:
    """`value`, a tool's text argument; ToolError when it is not a string, holds a NUL
    character (no path or command can) or is longer than MAX_ARGUMENT_CHARS."""
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string, not {brief(value)}")
    if "\0" in value:
        raise ToolError(f"{name} holds a NUL character, which no path or command can")
    if len(value) > MAX_ARGUMENT_CHARS:
        raise ToolError(f"{name} is {len(value)} characters long; at most {MAX_ARGUMENT_CHARS}")
    return value


def number_argument(name: str, value) -> int:
    """`value`, a line or turn number; ToolError when it is not a whole number (a string, a
    bool, a fraction, NaN or infinity, which JSON's 1e400 decodes to)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name} must be a whole number, not {brief(value)}")
    return value


def brief(value) -> str:
    """`value`'s repr, cut short enough to quote in an error."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def cap(text: str, limit: int, hint: str) -> str:
    """`text` cut to `limit` characters (at a line end when one is near) with a note saying so."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return f"{text[:cut]}\n[truncated: showed {cut} of {len(text)} characters; {hint}]"
