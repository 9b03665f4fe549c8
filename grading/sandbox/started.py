"""Whether a run reached its command: a line the sandbox prints just before the command starts.

A sandbox that cannot set up (bwrap unable to mount a folder its user cannot enter, a container
runtime without its image) exits non-zero, as a failing command does. The line tells the two
apart: it is printed inside the sandbox, under its limits, right before `exec` of the command,
so a command's own code can never take it back; a run whose output lacks it never started.
"""

from __future__ import annotations

STARTED = "[gagar sandbox: the command starts]"


def announced(argv: list[str]) -> list[str]:
    """`argv`, run by a shell that prints STARTED (a line of its own) and then becomes it."""
    return ["sh", "-c", f"printf '%s\\n' '{STARTED}' && exec \"$@\"", "sh", *argv]


def reached(output: str) -> tuple[bool, str]:
    """Whether `output` says the command started, and `output` without that line."""
    line = f"{STARTED}\n"
    at = output.find(line)
    if at < 0:
        return False, output
    return True, output[:at] + output[at + len(line):]
