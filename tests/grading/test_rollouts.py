import gzip
import hashlib
import io
import json
import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.jsonl import _Decoder, json_bytes
from grading.rollouts import (
    MAX_LINE_BYTES,
    ErrorLog,
    Rollout,
    RolloutFormatError,
    TaskInfo,
    content_of,
    load_rollouts,
    read_rollouts,
)
from tests.grading.agentic_fixtures import SAMPLE

TASK = {
    "id": "django-11099",
    "statement": "Fix the validator.",
    "repo": "django/django",
    "base_commit": "abc123",
    "reference_patch": None,
}


def record(**fields):
    """A valid record with only the required fields, overridden or extended by ``fields``."""
    base = {"group_id": "g1", "trajectory_id": "t1", "reward": 1.0, "patch": "diff --git a b"}
    base.update(fields)
    return {key: value for key, value in base.items() if value is not ...}


def jsonl(*lines):
    """JSONL bytes; dicts are encoded, strings and bytes are written as they are."""
    out = []
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line)
        out.append(line.encode() if isinstance(line, str) else line)
    return b"\n".join(out) + b"\n"


def write(path, *lines, compress=None):
    data = jsonl(*lines)
    if compress == "gzip":
        data = gzip.compress(data)
    elif compress == "zstd":
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def read(*paths, **options):
    errors = ErrorLog()
    rollouts = list(read_rollouts(paths, errors=errors, **options))
    return rollouts, errors


def read_one_bad(tmp_path, *lines):
    """Messages for a file whose every line is expected to be rejected."""
    rollouts, errors = read(write(tmp_path / "r.jsonl", *lines))
    assert rollouts == []
    return errors.messages


# Good input


def test_it_reads_every_field_of_a_full_record(tmp_path):
    full = record(
        passed=False,
        task={**TASK, "difficulty": "hard"},
        messages=[
            {"role": "system", "content": "You fix bugs."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "x"}]},
            {"role": "tool", "content": [{"type": "text", "text": "ok"}], "tool_call_id": "c1"},
        ],
        tests={"passed": ["test_a"], "failed": ["test_b"], "log": "1 failed"},
        metrics={"num_turns": 3, "output_tokens": 120, "input_tokens": 0, "loss": [0.5]},
        meta={"step": 120},
    )
    path = write(tmp_path / "r.jsonl", full)

    [rollout], errors = read(path)

    assert not errors
    assert rollout.group_id == "g1" and rollout.trajectory_id == "t1"
    assert rollout.reward == 1.0 and rollout.passed is False
    assert rollout.patch == "diff --git a b"
    assert rollout.task == TaskInfo(
        "django-11099",
        "Fix the validator.",
        "django/django",
        "abc123",
        None,
        {"difficulty": "hard"},
    )
    assert rollout.messages == full["messages"]
    assert rollout.tests == full["tests"]
    assert rollout.metrics == full["metrics"]
    assert rollout.meta == {"step": 120}
    assert (rollout.source, rollout.line) == (str(path), 1)
    assert len(rollout.content_hash) == 64


@pytest.mark.parametrize(
    ("name", "compress"),
    [("r.jsonl", None), ("r.jsonl.gz", "gzip"), ("r.jsonl.zst", "zstd")],
)
def test_it_reads_plain_gzip_and_zstd_files_alike(tmp_path, name, compress):
    lines = [record(trajectory_id=f"t{i}", reward=i / 10, meta={"i": i}) for i in range(50)]
    plain, _ = read(write(tmp_path / "plain.jsonl", *lines))

    rollouts, errors = read(write(tmp_path / name, *lines, compress=compress))

    assert not errors
    assert [r.content_hash for r in rollouts] == [r.content_hash for r in plain]
    assert [r.meta["i"] for r in rollouts] == list(range(50))


def test_it_reads_zstd_streamed_in_several_frames_with_checksums(tmp_path):
    buffer = io.BytesIO()
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    for i in range(3):
        with compressor.stream_writer(buffer, closefd=False) as writer:
            writer.write(jsonl(record(trajectory_id=f"t{i}")))
    (tmp_path / "r.jsonl.zst").write_bytes(buffer.getvalue())

    rollouts, errors = read(tmp_path / "r.jsonl.zst")

    assert not errors
    assert [r.trajectory_id for r in rollouts] == ["t0", "t1", "t2"]


def test_it_reads_a_gzip_file_of_several_members(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(
        gzip.compress(jsonl(record(trajectory_id="a"))) + gzip.compress(jsonl(record()))
    )

    rollouts, errors = read(path)

    assert not errors and len(rollouts) == 2


def test_it_reads_rollouts_across_files_in_order(tmp_path):
    first = write(tmp_path / "a.jsonl", record(trajectory_id="t1"))
    second = write(tmp_path / "b.jsonl.gz", record(trajectory_id="t2"), compress="gzip")

    rollouts, errors = read(first, second)

    assert not errors
    assert [(r.trajectory_id, r.source) for r in rollouts] == [
        ("t1", str(first)),
        ("t2", str(second)),
    ]


def test_it_accepts_a_single_path(tmp_path):
    path = write(tmp_path / "r.jsonl", record())

    assert len(list(read_rollouts(str(path), errors=ErrorLog()))) == 1


def test_it_skips_blank_lines_but_counts_them(tmp_path):
    path = write(tmp_path / "r.jsonl", "", record(), "   ", "\r", record(trajectory_id="t2"))

    rollouts, errors = read(path)

    assert not errors
    assert [r.line for r in rollouts] == [2, 5]


def test_it_accepts_crlf_line_endings_and_a_byte_order_mark(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(record()).encode() + b"\r\n")

    rollouts, errors = read(path)

    assert not errors and len(rollouts) == 1


def test_it_accepts_a_last_line_without_newline(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record()))

    rollouts, errors = read(path)

    assert not errors and len(rollouts) == 1


def test_passed_defaults_to_reward_reaching_the_threshold(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        record(trajectory_id="full", reward=1),
        record(trajectory_id="partial", reward=0.99),
        record(trajectory_id="above", reward=2.5),
    )

    rollouts, _ = read(path)

    assert {r.trajectory_id: r.passed for r in rollouts} == {
        "full": True,
        "partial": False,
        "above": True,
    }


def test_pass_threshold_is_configurable(tmp_path):
    path = write(tmp_path / "r.jsonl", record(reward=0.5))

    [rollout], _ = read(path, pass_threshold=0.5)

    assert rollout.passed is True


def test_explicit_passed_overrides_the_default(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        record(trajectory_id="a", reward=1.0, passed=False),
        record(trajectory_id="b", reward=0.0, passed=True),
        record(trajectory_id="c", reward=1.0, passed=None),
    )

    rollouts, _ = read(path)

    assert [r.passed for r in rollouts] == [False, True, True]


def test_an_integer_reward_is_read_as_a_float(tmp_path):
    [rollout], _ = read(write(tmp_path / "r.jsonl", record(reward=-1)))

    assert rollout.reward == -1.0 and isinstance(rollout.reward, float)


def test_it_keeps_unknown_top_level_keys_in_meta(tmp_path):
    path = write(tmp_path / "r.jsonl", record(step=120, sampler={"t": 0.7}, meta={"run": "r7"}))

    [rollout], errors = read(path)

    assert not errors
    assert rollout.meta == {"run": "r7", "step": 120, "sampler": {"t": 0.7}}


def test_absent_optional_fields_get_defaults(tmp_path):
    [rollout], _ = read(write(tmp_path / "r.jsonl", record()))

    assert (rollout.task, rollout.messages, rollout.tests) == (None, None, None)
    assert (rollout.metrics, rollout.meta) == ({}, {})


def test_a_task_id_defaults_to_the_group_id_and_unknown_task_keys_go_to_extra(tmp_path):
    task = {"statement": "s", "repo": "o/r", "base_commit": "c", "hints": ["h"]}

    [rollout], _ = read(write(tmp_path / "r.jsonl", record(group_id="grp", task=task)))

    assert rollout.task == TaskInfo("grp", "s", "o/r", "c", None, {"hints": ["h"]})


def test_the_same_task_may_appear_on_several_lines_of_a_group(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        record(trajectory_id="t1", task=TASK),
        record(trajectory_id="t2"),
        record(trajectory_id="t3", task=dict(reversed(TASK.items()))),
    )

    rollouts, errors = read(path)

    assert not errors
    assert [r.task is not None for r in rollouts] == [True, False, True]


def test_the_same_trajectory_id_may_appear_in_different_groups(tmp_path):
    path = write(tmp_path / "r.jsonl", record(group_id="a"), record(group_id="b"))

    rollouts, errors = read(path)

    assert not errors and len(rollouts) == 2


def test_a_line_exactly_at_the_limit_is_accepted(tmp_path):
    line = json.dumps(record(patch=""))
    line = line[:-1] + " " * (200 - len(line)) + "}"
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n" + line.replace("t1", "t2"))

    rollouts, errors = read(path, max_line_bytes=200)

    assert not errors and len(rollouts) == 2


def test_read_rollouts_is_lazy(tmp_path):
    path = write(tmp_path / "r.jsonl", record(trajectory_id="t1"), "{not json")
    errors = ErrorLog()

    rollouts = read_rollouts([path], errors=errors)
    first = next(rollouts)

    assert first.trajectory_id == "t1"
    assert not errors, "the second line must not have been read yet"
    with path.open("a") as later:
        later.write(json.dumps(record(trajectory_id="t3")) + "\n")
    assert [r.trajectory_id for r in rollouts] == ["t3"]
    assert errors.count == 1


def test_load_rollouts_returns_the_rollouts_of_valid_files(tmp_path):
    path = write(tmp_path / "r.jsonl", record(), record(trajectory_id="t2"))

    rollouts = load_rollouts([path])

    assert [type(r) for r in rollouts] == [Rollout, Rollout]


def test_load_rollouts_raises_with_every_error(tmp_path):
    path = write(tmp_path / "r.jsonl", record(reward="1"), record(trajectory_id="t2", patch=None))

    with pytest.raises(RolloutFormatError) as raised:
        load_rollouts([path])

    assert raised.value.errors.count == 2
    assert str(raised.value) == (
        f"{path}:1: reward: must be a number, got a string\n"
        f"{path}:2: patch: must be a string, got null"
    )
    assert raised.value.permanent is True


def test_a_rollout_format_error_survives_pickling(tmp_path):
    errors = ErrorLog()
    errors.add("r.jsonl", 3, "reward", "must be a number, got a string")

    copy = pickle.loads(pickle.dumps(RolloutFormatError(errors)))

    assert str(copy) == "r.jsonl:3: reward: must be a number, got a string"
    assert copy.errors.count == 1


# Content hash


def test_content_hash_is_equal_for_equal_content(tmp_path):
    full = record(task=TASK, messages=[{"role": "user", "content": "é"}], meta={"b": 1, "a": 2})
    a = write(tmp_path / "a.jsonl", full)
    reordered = json.dumps(dict(reversed(full.items())), indent=None, ensure_ascii=True)
    b = write(tmp_path / "b.jsonl.gz", "", reordered.replace(":", " : "), compress="gzip")

    [first], _ = read(a)
    [second], _ = read(b)

    assert (first.source, first.line) != (second.source, second.line)
    assert first.content_hash == second.content_hash


def test_content_hash_treats_an_integer_reward_like_the_equal_float(tmp_path):
    [first], _ = read(write(tmp_path / "a.jsonl", record(reward=1)))
    [second], _ = read(write(tmp_path / "b.jsonl", record(reward=1.0)))

    assert first.content_hash == second.content_hash


@pytest.mark.parametrize(
    "change",
    [
        {"group_id": "g2"},
        {"trajectory_id": "t2"},
        {"reward": 0.5},
        {"passed": False},
        {"patch": "diff --git b c"},
        {"task": {**TASK, "statement": "Other."}},
        {"task": {**TASK, "extra": 1}},
        {"messages": [{"role": "user", "content": "hi!"}]},
        {"tests": {"passed": ["test_a"], "failed": []}},
        {"metrics": {"num_turns": 4}},
        {"meta": {"step": 2}},
        {"unknown": 1},
    ],
)
def test_content_hash_changes_with_any_field(tmp_path, change):
    base = record(
        task=TASK,
        messages=[{"role": "user", "content": "hi"}],
        tests={"passed": ["test_a"]},
        metrics={"num_turns": 3},
        meta={"step": 1},
    )
    [original], _ = read(write(tmp_path / "a.jsonl", base))
    [changed], _ = read(write(tmp_path / "b.jsonl", {**base, **change}))

    assert changed.content_hash != original.content_hash


# Text a database can store: no NUL, no lone surrogates.
storable_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | storable_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(storable_text, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(meta=st.dictionaries(storable_text, json_values, max_size=4), patch=storable_text)
def test_any_json_meta_round_trips_with_a_hash_independent_of_layout(tmp_path_factory, meta, patch):
    folder = tmp_path_factory.mktemp("prop")
    original = record(meta=meta, patch=patch)
    compact = json.dumps(original, separators=(",", ":"), ensure_ascii=False)
    spaced = json.dumps(dict(reversed(original.items())), indent=None, ensure_ascii=True)

    [first], errors = read(write(folder / "a.jsonl", compact))
    [second], _ = read(write(folder / "b.jsonl", spaced))

    assert not errors
    assert first.meta == meta and first.patch == patch
    assert second.content_hash == first.content_hash


# Bad lines and fields


def test_it_rejects_malformed_json(tmp_path):
    messages = read_one_bad(tmp_path, '{"group_id": "g1",', "{'single': 1}", "nope")

    assert messages == [
        f"{tmp_path / 'r.jsonl'}:1: line: not valid JSON: Expecting property name enclosed in "
        "double quotes at column 19",
        f"{tmp_path / 'r.jsonl'}:2: line: not valid JSON: Expecting property name enclosed in "
        "double quotes at column 2",
        f"{tmp_path / 'r.jsonl'}:3: line: not valid JSON: Expecting value at column 1",
    ]


def test_json_errors_that_end_in_at_read_once_at_column(tmp_path):
    messages = read_one_bad(tmp_path, '{"group_id": "g1', '{"group_id": "g\tx"}')

    assert messages == [
        f"{tmp_path / 'r.jsonl'}:1: line: not valid JSON: Unterminated string starting at column 14",
        f"{tmp_path / 'r.jsonl'}:2: line: not valid JSON: Invalid control character at column 16",
    ]


def test_it_rejects_trailing_data_after_the_object(tmp_path):
    [message] = read_one_bad(tmp_path, json.dumps(record()) + " {}")

    assert "line: not valid JSON: Extra data" in message


@pytest.mark.parametrize("value", ["[1, 2]", '"text"', "3", "null"])
def test_it_rejects_a_line_that_is_not_an_object(tmp_path, value):
    [message] = read_one_bad(tmp_path, value)

    assert ":1: line: must be a JSON object, got " in message


@pytest.mark.parametrize("field", ["group_id", "trajectory_id", "reward", "patch"])
def test_it_rejects_each_missing_required_field(tmp_path, field):
    assert read_one_bad(tmp_path, record(**{field: ...})) == [
        f"{tmp_path / 'r.jsonl'}:1: {field}: missing (required)"
    ]


def rejected_field(tmp_path, change):
    """The ``field: reason`` of the one problem in a record changed by ``change``."""
    [message] = read_one_bad(tmp_path, record(**change))
    assert message.startswith(f"{tmp_path / 'r.jsonl'}:1: ")
    return message.split(":1: ", 1)[1]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"reward": float("nan")}, "reward: must be a finite number, got NaN"),
        ({"reward": float("inf")}, "reward: must be a finite number, got Infinity"),
        ({"reward": float("-inf")}, "reward: must be a finite number, got -Infinity"),
        ({"reward": "1.0"}, "reward: must be a number, got a string"),
        ({"reward": True}, "reward: must be a number, got true"),
        ({"reward": None}, "reward: must be a number, got null"),
        ({"reward": [1]}, "reward: must be a number, got an array"),
        ({"group_id": 7}, "group_id: must be a string, got 7"),
        ({"group_id": ""}, "group_id: must not be empty"),
        ({"group_id": "g" * 513}, "group_id: is 513 characters long, over the limit of 512"),
        ({"trajectory_id": None}, "trajectory_id: must be a string, got null"),
        ({"trajectory_id": "t\n1"}, "trajectory_id: must not contain control characters"),
        ({"trajectory_id": "t\x7f"}, "trajectory_id: must not contain control characters"),
        ({"patch": None}, "patch: must be a string, got null"),
        ({"patch": ["diff"]}, "patch: must be a string, got an array"),
        ({"passed": 1}, "passed: must be true or false, got 1"),
        ({"passed": "yes"}, "passed: must be true or false, got a string"),
        ({"messages": {"role": "user"}}, "messages: must be an array, got an object"),
        ({"messages": ["hi"]}, "messages[0]: must be an object, got a string"),
        ({"meta": []}, "meta: must be an object, got an array"),
        ({"meta": {"step": 1}, "step": 2}, "step: unknown key clashes with meta.step"),
    ],
)
def test_it_rejects_an_ill_typed_top_level_field(tmp_path, change, problem):
    assert rejected_field(tmp_path, change) == problem


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        ("django", "task: must be an object, got a string"),
        ({**TASK, "id": 3}, "task.id: must be a string, got 3"),
        ({**TASK, "id": ""}, "task.id: must not be empty"),
        ({"repo": "o/r", "base_commit": "c"}, "task.statement: missing (required)"),
        ({**TASK, "statement": 1}, "task.statement: must be a string, got 1"),
        ({**TASK, "repo": 7}, "task.repo: must be a string, got 7"),
        ({**TASK, "base_commit": {}}, "task.base_commit: must be a string, got an object"),
        ({**TASK, "reference_patch": 0}, "task.reference_patch: must be a string, got 0"),
    ],
)
def test_it_rejects_an_ill_typed_task(tmp_path, task, problem):
    assert rejected_field(tmp_path, {"task": task}) == problem


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"content": "hi"}, ".role: missing (required)"),
        ({"role": None}, ".role: must be a string, got null"),
        (
            {"role": "u", "content": 5},
            ".content: must be a string, null or an array of parts, got 5",
        ),
        ({"role": "user", "content": ["hi"]}, ".content[0]: must be an object, got a string"),
        ({"role": "assistant", "tool_calls": {}}, ".tool_calls: must be an array, got an object"),
        ({"role": "a", "tool_calls": [[]]}, ".tool_calls[0]: must be an object, got an array"),
        ({"role": "tool", "tool_call_id": 1}, ".tool_call_id: must be a string, got 1"),
        ({"role": "tool", "name": []}, ".name: must be a string, got an array"),
    ],
)
def test_it_rejects_an_ill_typed_message(tmp_path, message, problem):
    messages = [{"role": "user", "content": "hi"}, message]

    assert rejected_field(tmp_path, {"messages": messages}) == f"messages[1]{problem}"


@pytest.mark.parametrize(
    ("tests", "problem"),
    [
        ([], "tests: must be an object, got an array"),
        ({"passed": "test_a"}, "tests.passed: must be an array, got a string"),
        ({"failed": ["a", 2]}, "tests.failed[1]: must be a string, got 2"),
        ({"log": 1}, "tests.log: must be a string, got 1"),
    ],
)
def test_it_rejects_ill_typed_tests(tmp_path, tests, problem):
    assert rejected_field(tmp_path, {"tests": tests}) == problem


@pytest.mark.parametrize(
    ("metrics", "problem"),
    [
        (3, "metrics: must be an object, got 3"),
        ({"num_turns": -1}, "metrics.num_turns: must be a non-negative integer, got -1"),
        ({"output_tokens": 1.5}, "metrics.output_tokens: must be a non-negative integer, got 1.5"),
        ({"input_tokens": True}, "metrics.input_tokens: must be a non-negative integer, got true"),
        (
            {"input_tokens": "9"},
            "metrics.input_tokens: must be a non-negative integer, got a string",
        ),
    ],
)
def test_it_rejects_ill_typed_metrics(tmp_path, metrics, problem):
    assert rejected_field(tmp_path, {"metrics": metrics}) == problem


def test_it_rejects_nan_reward(tmp_path):
    line = json.dumps(record()).replace("1.0", "NaN")

    assert read_one_bad(tmp_path, line) == [
        f"{tmp_path / 'r.jsonl'}:1: reward: must be a finite number, got NaN"
    ]


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity"])
def test_it_rejects_infinite_reward(tmp_path, literal):
    line = json.dumps(record()).replace("1.0", literal)

    [message] = read_one_bad(tmp_path, line)

    assert message.endswith(f":1: reward: must be a finite number, got {literal}")


@pytest.mark.parametrize("literal", ["1e400", "-1e999", "1.8E+308", "-2e308"])
def test_it_names_a_reward_beyond_the_float_range_as_out_of_range(tmp_path, literal):
    line = json.dumps(record()).replace("1.0", literal)

    [message] = read_one_bad(tmp_path, line)

    assert message.endswith(f":1: reward: {literal} is out of range for a float")


def test_it_rejects_an_integer_reward_too_large_for_a_float(tmp_path):
    line = json.dumps(record()).replace("1.0", "1" + "0" * 400)

    [message] = read_one_bad(tmp_path, line)

    assert message.endswith(":1: reward: a 401-digit integer is out of range for a float")


def test_it_rejects_nan_and_infinity_anywhere_in_a_record(tmp_path):
    line = json.dumps(record(meta={"loss": 0.0}, metrics={"kl": [1.0, 2.0]}, extra=3.0))
    line = line.replace("0.0", "NaN").replace("2.0", "-Infinity").replace("3.0", "1e999")

    messages = read_one_bad(tmp_path, line)

    assert [m.split(":1: ")[1] for m in messages] == [
        "meta.loss: must be a finite number, got NaN",
        "metrics.kl[1]: must be a finite number, got -Infinity",
        "extra: 1e999 is out of range for a float",
    ]


def test_it_rejects_an_unpaired_surrogate_escape(tmp_path):
    line = json.dumps(record(messages=[{"role": "user", "content": "\ud83d"}]))

    assert read_one_bad(tmp_path, line) == [
        f"{tmp_path / 'r.jsonl'}:1: messages[0].content: contains an unpaired surrogate escape"
    ]


KEY_PLACES = {
    "top level": (lambda key: record(**{key: 1}), ""),
    "meta": (lambda key: record(meta={key: 1}), "meta."),
    "task": (lambda key: record(task={**TASK, key: 1}), "task."),
    "a message": (lambda key: record(messages=[{"role": "user", "content": "c", key: 1}]), "messages[0]."),
    "tests": (lambda key: record(tests={"passed": [], key: 1}), "tests."),
    "nested": (lambda key: record(meta={"a": [{"b": {key: 1}}]}), "meta.a[0].b."),
}


@pytest.mark.parametrize("place", KEY_PLACES)
def test_it_rejects_a_nul_character_in_a_key_anywhere(tmp_path, place):
    make, prefix = KEY_PLACES[place]

    assert read_one_bad(tmp_path, make("a\x00b")) == [
        f"{tmp_path / 'r.jsonl'}:1: {prefix}a\\u0000b: name contains a NUL character (\\u0000), "
        "which the database cannot store"
    ]


@pytest.mark.parametrize("place", KEY_PLACES)
def test_it_rejects_an_unpaired_surrogate_in_a_key_anywhere(tmp_path, place):
    make, prefix = KEY_PLACES[place]

    assert read_one_bad(tmp_path, make("a\ud800b")) == [
        f"{tmp_path / 'r.jsonl'}:1: {prefix}a\\ud800b: name contains an unpaired surrogate escape"
    ]


def test_control_characters_of_a_key_are_escaped_so_each_error_stays_on_one_line(tmp_path):
    messages = read_one_bad(tmp_path, record(meta={"a\nb": float("nan")}))

    assert messages == [f"{tmp_path / 'r.jsonl'}:1: meta.a\\u000ab: must be a finite number, got NaN"]


def test_it_reports_every_bad_field_of_a_line(tmp_path):
    messages = read_one_bad(tmp_path, {"group_id": "", "reward": "x", "patch": 1, "meta": []})

    assert [m.split(":1: ")[1] for m in messages] == [
        "group_id: must not be empty",
        "trajectory_id: missing (required)",
        "reward: must be a number, got a string",
        "patch: must be a string, got 1",
        "meta: must be an object, got an array",
    ]


def test_it_reports_every_bad_line_and_keeps_the_good_ones(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        record(trajectory_id="t1"),
        "{oops",
        record(trajectory_id="t3", reward=None),
        record(trajectory_id="t4"),
        b"\xff\xfe",
        record(trajectory_id="t6", patch=3),
    )

    rollouts, errors = read(path)

    assert [r.trajectory_id for r in rollouts] == ["t1", "t4"]
    assert errors.count == 4
    assert [m.split(": ")[0] for m in errors.messages] == [f"{path}:{n}" for n in (2, 3, 5, 6)]


def test_it_reports_non_utf8_bytes_with_the_line_and_keeps_going(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        record(),
        b'{"group_id": "g1", "trajectory_id": "t\xe9", "reward": 1, "patch": ""}',
        record(trajectory_id="t3"),
    )

    rollouts, errors = read(path)

    assert [r.line for r in rollouts] == [1, 3]
    assert errors.messages == [f"{path}:2: line: not valid UTF-8: byte 0xe9 at offset 38"]


def test_it_rejects_duplicate_trajectory_ids_in_one_file(tmp_path):
    path = write(tmp_path / "r.jsonl", record(), record(trajectory_id="t2"), record(reward=0.0))

    rollouts, errors = read(path)

    assert [r.line for r in rollouts] == [1, 2]
    assert errors.messages == [
        f"{path}:3: trajectory_id: 't1' of group 'g1' already appeared at {path}:1"
    ]


def test_it_rejects_duplicate_trajectory_ids_across_files(tmp_path):
    first = write(tmp_path / "a.jsonl", record(trajectory_id="t0"), record())
    second = write(tmp_path / "b.jsonl.gz", record(), compress="gzip")

    _, errors = read(first, second)

    assert errors.messages == [
        f"{second}:1: trajectory_id: 't1' of group 'g1' already appeared at {first}:2"
    ]


@pytest.mark.parametrize("spelling", ["same", "dot", "parent", "symlink", "hard link"])
def test_the_same_file_given_twice_is_refused_however_it_is_spelled(tmp_path, monkeypatch, spelling):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    first = write(tmp_path / "r.jsonl", record(), record(trajectory_id="t2"))
    again = {
        "same": lambda: first,
        "dot": lambda: Path("./r.jsonl"),
        "parent": lambda: tmp_path / "sub" / ".." / "r.jsonl",
        "symlink": lambda: (tmp_path / "link.jsonl").symlink_to(first) or tmp_path / "link.jsonl",
        "hard link": lambda: (tmp_path / "hard.jsonl").hardlink_to(first) or tmp_path / "hard.jsonl",
    }[spelling]()

    rollouts, errors = read(first, again)

    assert [r.line for r in rollouts] == [1, 2]
    assert errors.messages == [f"{again}: file: is the same file as {first}, given before; give each file once"]


def test_a_duplicate_is_reported_even_when_the_first_line_was_invalid(tmp_path):
    _, errors = read(write(tmp_path / "r.jsonl", record(reward="x"), record()))

    assert errors.count == 2
    assert "already appeared at" in errors.messages[1]


def test_it_rejects_a_conflicting_task_within_a_group(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        record(trajectory_id="t1"),
        record(trajectory_id="t2", task=TASK),
        record(trajectory_id="t3", task={**TASK, "base_commit": "def456"}),
        record(trajectory_id="t4", task=TASK),
    )

    rollouts, errors = read(path)

    assert [r.trajectory_id for r in rollouts] == ["t1", "t2", "t4"]
    assert errors.messages == [
        f"{path}:3: task: differs from the task of group 'g1' given at {path}:2"
    ]


def test_it_rejects_a_conflicting_task_across_files(tmp_path):
    first = write(tmp_path / "a.jsonl", record(task=TASK))
    second = write(tmp_path / "b.jsonl", record(trajectory_id="t2", task={**TASK, "x": 1}))

    _, errors = read(first, second)

    assert errors.messages == [
        f"{second}:1: task: differs from the task of group 'g1' given at {first}:1"
    ]


def test_a_task_without_id_equals_one_whose_id_is_the_group_id(tmp_path):
    without_id = {key: value for key, value in TASK.items() if key != "id"}
    path = write(
        tmp_path / "r.jsonl",
        record(group_id="django-11099", task=without_id),
        record(group_id="django-11099", trajectory_id="t2", task=TASK),
    )

    _, errors = read(path)

    assert not errors


# Long lines


def test_it_rejects_a_line_over_the_limit_and_reads_the_next(tmp_path):
    path = write(tmp_path / "r.jsonl", record(patch="x" * 500), record(trajectory_id="t2"))

    rollouts, errors = read(path, max_line_bytes=300)

    assert [r.line for r in rollouts] == [2]
    size = len(json.dumps(record(patch="x" * 500)))
    assert errors.messages == [f"{path}:1: line: is {size} bytes, over the limit of 300"]


@pytest.mark.parametrize("limit", [4 * 1024 * 1024, MAX_LINE_BYTES])
def test_it_rejects_a_50mb_line_in_memory_bounded_by_the_limit(tmp_path, limit):
    path = tmp_path / "big.jsonl"
    after = jsonl(record(trajectory_id="after"))
    with path.open("wb") as out:
        out.write(b'{"group_id": "g1", "trajectory_id": "big", "reward": 1, "patch": "')
        chunk = b"x" * (1024 * 1024)
        for _ in range(50):
            out.write(chunk)
        out.write(b'"}\n' + after)
    size = path.stat().st_size - len(after) - 1

    tracemalloc.start()
    try:
        rollouts, errors = read(path, max_line_bytes=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 1.25 * limit + 1024 * 1024, f"peak {peak} bytes for a {size}-byte line"
    assert [r.trajectory_id for r in rollouts] == ["after"]
    assert errors.messages == [f"{path}:1: line: is {size} bytes, over the limit of {limit}"]


def test_the_default_line_limit_is_32_mib():
    assert MAX_LINE_BYTES == 32 * 1024 * 1024


def test_it_rejects_a_long_line_inside_a_compressed_file(tmp_path):
    path = write(
        tmp_path / "r.jsonl.zst",
        record(patch="x" * 100_000),
        record(trajectory_id="t2"),
        compress="zstd",
    )

    rollouts, errors = read(path, max_line_bytes=1000)

    assert [r.line for r in rollouts] == [2]
    size = len(json.dumps(record(patch="x" * 100_000)))
    assert errors.messages == [f"{path}:1: line: is {size} bytes, over the limit of 1000"]


# Whole files


def test_it_rejects_an_empty_file(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"")

    _, errors = read(path)

    assert errors.messages == [f"{path}: file: empty file (no records)"]


@pytest.mark.parametrize(
    ("name", "compress"), [("r.jsonl", None), ("r.jsonl.gz", "gzip"), ("r.jsonl.zst", "zstd")]
)
def test_a_file_of_blank_lines_is_empty(tmp_path, name, compress):
    path = write(tmp_path / name, "", "  ", compress=compress)

    _, errors = read(path)

    assert errors.messages == [f"{path}: file: empty file (no records)"]


def test_a_file_of_bad_lines_is_not_reported_as_empty(tmp_path):
    _, errors = read(write(tmp_path / "r.jsonl", "{"))

    assert errors.count == 1 and "empty" not in errors.messages[0]


def test_it_reports_a_truncated_gzip_file_with_the_line_reached(tmp_path):
    lines = [record(trajectory_id=f"t{i}", patch=f"{i}" * 50) for i in range(2000)]
    data = gzip.compress(jsonl(*lines))
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])

    rollouts, errors = read(path)

    assert 0 < len(rollouts) < 2000
    [message] = errors.messages
    assert message.startswith(f"{path}:{len(rollouts) + 1}: file: truncated or corrupt gzip data")


def test_it_reports_a_corrupt_gzip_file(tmp_path):
    data = bytearray(gzip.compress(jsonl(*[record(trajectory_id=f"t{i}") for i in range(500)])))
    data[-8] ^= 0xFF  # the CRC
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(bytes(data))

    _, errors = read(path)

    assert errors.count == 1
    assert "file: truncated or corrupt gzip data" in errors.messages[0]


@pytest.mark.parametrize("cut", [1, 5, 100, 2000])
def test_it_reports_a_truncated_zstd_file_with_the_line_reached(tmp_path, cut):
    lines = [record(trajectory_id=f"t{i}", patch=f"{i}" * 50) for i in range(2000)]
    data = zstandard.ZstdCompressor().compress(jsonl(*lines))
    path = tmp_path / "r.jsonl.zst"
    path.write_bytes(data[:-cut])

    rollouts, errors = read(path)

    assert len(rollouts) < 2000
    [message] = errors.messages
    assert message.startswith(f"{path}:{len(rollouts) + 1}: file: truncated or corrupt zstd data")


def test_it_reports_data_after_the_last_zstd_frame(tmp_path):
    path = tmp_path / "r.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(jsonl(record())) + b"garbage!")

    _, errors = read(path)

    assert errors.count == 1
    assert "file: truncated or corrupt zstd data" in errors.messages[0]


@pytest.mark.parametrize(
    ("name", "compress", "reason"),
    [
        ("r.jsonl", "gzip", "contents are gzip-compressed but the name does not end in .gz"),
        ("r.jsonl", "zstd", "contents are zstd-compressed but the name does not end in .zst"),
        ("r.jsonl.gz", "zstd", "contents are zstd-compressed but the name does not end in .zst"),
        ("r.jsonl.zst", None, "name ends in .zst but the contents are not zstd data"),
        ("r.jsonl.gz", None, "name ends in .gz but the contents are not gzip data"),
    ],
)
def test_it_rejects_a_misnamed_file(tmp_path, name, compress, reason):
    path = write(tmp_path / name, record(), compress=compress)

    rollouts, errors = read(path)

    assert rollouts == []
    assert errors.messages == [f"{path}: file: {reason}"]


def test_it_reports_a_nonexistent_path_and_reads_the_others(tmp_path):
    missing = tmp_path / "missing.jsonl"
    present = write(tmp_path / "r.jsonl", record())

    rollouts, errors = read(missing, present)

    assert len(rollouts) == 1
    assert errors.messages == [f"{missing}: file: no such file"]


def test_it_reports_a_directory_given_as_a_path(tmp_path):
    _, errors = read(tmp_path)

    assert errors.messages == [f"{tmp_path}: file: is a directory, not a file"]


def test_the_module_imports_nothing_from_the_web_side():
    code = (
        "import sys, grading.rollouts\n"
        "loaded = {name.split('.')[0] for name in sys.modules}\n"
        "print(sorted(loaded & {'django', 'celery', 'kombu', 'webapp', 'workers'}))"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)

    assert result.stdout.strip() == "[]", result.stderr


def test_it_refuses_a_non_finite_pass_threshold(tmp_path):
    with pytest.raises(ValueError):
        read_rollouts([tmp_path / "r.jsonl"], errors=ErrorLog(), pass_threshold=float("nan"))


# ErrorLog


def test_error_log_formats_messages_with_and_without_a_line():
    errors = ErrorLog()
    errors.add("a.jsonl", 3, "messages[2].role", "missing (required)")
    errors.add("a.jsonl", None, "file", "empty file (no records)")

    assert errors.messages == [
        "a.jsonl:3: messages[2].role: missing (required)",
        "a.jsonl: file: empty file (no records)",
    ]


def test_an_empty_error_log_is_falsy():
    errors = ErrorLog()
    assert not errors and errors.count == 0 and errors.summary() == ""
    errors.add("a.jsonl", 1, "line", "bad")
    assert errors


def test_error_log_keeps_the_first_messages_and_counts_all():
    errors = ErrorLog(cap=2)
    for line in range(1, 6):
        errors.add("a.jsonl", line, "reward", "bad")

    assert errors.count == 5
    assert (
        errors.summary() == "a.jsonl:1: reward: bad\na.jsonl:2: reward: bad\n... and 3 more errors not shown"
    )


def test_reading_caps_kept_messages_at_50_and_stops_at_100_errors_by_default(tmp_path):
    path = write(
        tmp_path / "r.jsonl", *[record(trajectory_id=f"t{i}", reward="x") for i in range(120)]
    )

    _, errors = read(path)

    assert errors.count == 100 and len(errors.messages) == 50
    assert errors.summary().endswith("\n... and 50 more errors not shown; stopped after 100 errors, "
                                     "the rest was not read")


def test_it_rejects_a_nul_character_the_database_cannot_store(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "a\\u0000b"}\n')
    errors = ErrorLog()
    assert list(read_rollouts([path], errors=errors)) == []
    assert errors.messages == [f"{path}:1: patch: contains a NUL character (\\u0000), which the database cannot store"]


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(value=_JSON_VALUES, ascii_only=st.booleans())
@settings(max_examples=300, deadline=None)
def test_lines_parse_exactly_as_the_json_module_reads_them(value, ascii_only):
    # The fast parser (orjson) must agree with json on every value: big integers,
    # float digits, escapes, surrogates; where it can't, the line takes json's path.
    text = json.dumps({"v": value}, ensure_ascii=ascii_only)
    got = _Decoder().decode(text.encode("utf-8", "surrogatepass"), first=False)
    expected = json.loads(text)
    if isinstance(got, str):  # only bytes that are not UTF-8 (a surrogate written raw)
        assert not ascii_only and "not valid UTF-8" in got
    else:
        assert json.dumps(got) == json.dumps(expected)


@given(value=_JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_json_bytes_writes_what_json_reads_back(value):
    try:
        written = json_bytes({"v": value}, sort_keys=True)
    except ValueError:  # an unpaired surrogate has no UTF-8 form
        with pytest.raises(UnicodeEncodeError):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        return
    # Same value back (float digits may be written differently: 1e-8 or 1e-08).
    assert json.dumps(json.loads(written), sort_keys=True) == json.dumps({"v": value}, sort_keys=True)


def test_the_content_hash_covers_exactly_content_of():
    for r in load_rollouts([SAMPLE]):
        assert hashlib.sha256(json_bytes(content_of(r), sort_keys=True)).hexdigest() == r.content_hash
