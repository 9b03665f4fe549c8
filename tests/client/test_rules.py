"""The client's copy of the app's importer rules (`gagar_client.steps.record_problems`: the
client cannot import `grading/`) refuses exactly what the app refuses: each sample below
becomes the records a step sends, which the app's importer reads as it reads a step's body."""

import json

import pytest
from gagar_client.steps import MAX_KEY_CHARS, MAX_LINE_BYTES, Sample, group_records, record_problems, sample_problems

from grading.jsonl import ErrorLog
from grading.rollouts import read_rollouts

LIMIT = MAX_LINE_BYTES
# The longest JSON line of a record of the group "task" (a failing one: `"passed": false`) less
# its response, which it holds twice (the patch, the transcript).
OVERHEAD = len(json.dumps(group_records("task", [Sample(0.0, "", [{"role": "assistant", "content": ""}])],
                                        position=0, statement=None, pass_threshold=1.0)[0]))

# (name, group key, response, prompt, whether the app refuses it)
CASES = [
    ("plain", "task-1", "diff --git a/x b/x", "Fix it.", False),
    ("a control character in the key", "task\x07", "fix", None, True),
    ("a newline in the key", "task\n1", "fix", None, True),
    ("a C1 control character in the key", "task\x85", "fix", None, True),
    ("DEL in the key", "task\x7f", "fix", None, True),
    ("NUL in the key", "task\x00", "fix", None, True),
    ("a key of the longest length", "k" * MAX_KEY_CHARS, "fix", None, False),
    ("a key one character longer", "k" * (MAX_KEY_CHARS + 1), "fix", None, True),
    ("a non-ASCII key", "задача-é-🙂", "fix", None, False),
    ("an empty key", "", "fix", None, False),  # the group's name is never empty: ":<fingerprint>"
    ("an unpaired high surrogate in the response", "task", "fix \ud800", None, True),
    ("an unpaired low surrogate in the prompt", "task", "fix", "Fix \udfff it.", True),
    ("a paired surrogate (an emoji) in the response", "task", "fix 🙂", None, False),
    ("control characters in the response", "task", "fix\x07\x1b[0m\r\n\t\x85", "a\x01b", False),
    ("NUL in the response (sent as U+FFFD)", "task", "fix\x00", "\x00", False),
    ("a line at the limit", "task", "x" * ((LIMIT - OVERHEAD) // 2), None, False),
    ("a line over the limit", "task", "x" * ((LIMIT - OVERHEAD) // 2 + 1), None, True),
]


def app_problems(records: list[dict], tmp_path) -> list[str]:
    """The app's importer's errors on `records`, sent as Client.grade_step sends a step."""
    path = tmp_path / "step-0.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    errors = ErrorLog()
    list(read_rollouts([path], errors=errors, pass_threshold=1.0))
    return errors.messages


@pytest.mark.parametrize(("key", "response", "prompt", "refused"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_the_client_refuses_a_sample_exactly_when_the_app_does(key, response, prompt, refused, tmp_path):
    messages = ([{"role": "user", "content": prompt}] if prompt is not None else []) + [
        {"role": "assistant", "content": response}]
    samples = [Sample(reward=float(i % 2), patch=response, messages=messages) for i in range(2)]  # failing first
    records = group_records(key, samples, position=0, statement=None, pass_threshold=1.0)
    app = app_problems(records, tmp_path)

    assert bool(app) == refused, app
    assert bool(sample_problems(key, samples[0], {})) == refused
    # Field by field, record by record, as the app names them.
    assert {(line, field) for line, record in enumerate(records, start=1) for field, _ in record_problems(record)} \
        == {(int(where.split(":")[1]), field) for where, field, _ in (message.split(": ", 2) for message in app)}
