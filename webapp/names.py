"""The rule every name a user gives (a batch's, a run's) follows, checked here rather than by
the database, so that SQLite and PostgreSQL give the same answer."""

from __future__ import annotations

from grading.jsonl import CONTROL_CHARACTERS


def name_problem(name: str, *, what: str, max_chars: int) -> str | None:
    """Why `name` cannot name a `what` ("batch", "run"), if it cannot."""
    if not name:
        return f"a {what} name is required"
    if len(name) > max_chars:
        return f"is {len(name)} characters long, over the limit of {max_chars}"
    if CONTROL_CHARACTERS.search(name):
        return "must not contain control characters"
    if not is_utf8(name):
        return "must not contain unpaired surrogates (bytes that are not UTF-8)"
    return None


def is_utf8(text: str) -> bool:
    """False for text holding unpaired surrogates: from a command line's undecodable bytes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
