"""What one import may read (grading/limits.py): decompressed bytes and lines (blank ones
count), the size of a line or of a whole JSON file, errors, group size; and the files an
import refuses to open (FIFOs, links that leave a run folder) or to read (a key given twice)."""

import gzip
import json
import os
import threading
import tracemalloc
import zlib

import pytest
import zstandard
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from grading.formats.files import load_json
from grading.jsonl import ErrorLog, ImportStopped, _Decoder, read_json_lines
from grading.limits import MAX_GROUP_SIZE as CORE_MAX_GROUP_SIZE
from grading.limits import Limits
from grading.rollouts import MAX_GROUP_SIZE, load_rollouts, read_rollouts
from tests.grading.formats.agentruns import openhands_row, openhands_v1_row, swe_agent_traj
from tests.grading.formats.formatfiles import swebench_run, write_json, write_lines
from tests.grading.formats.helpers import read as read_format


def record(group="g", trajectory="t1", reward=1.0, **fields):
    return {"group_id": group, "trajectory_id": trajectory, "reward": reward, "patch": "", **fields}


def lines(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def read(*paths, limits=None):
    errors = ErrorLog(limits=limits or Limits())
    rollouts = list(read_rollouts(paths, errors=errors))
    return rollouts, errors


def zstd_of_blank_lines(path, total, unit=b"\n"):
    """A zstd file of `total` bytes of `unit` repeated, compressed as a stream (no copy in memory)."""
    block = unit * (1024 * 1024 // len(unit))
    with path.open("wb") as out, zstandard.ZstdCompressor(level=3).stream_writer(out) as writer:
        for _ in range(total // len(block)):
            writer.write(block)
    return path


def gzip_of_blank_lines(path, total, unit=b"\n"):
    block = unit * (1024 * 1024 // len(unit))
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip framing
    with path.open("wb") as out:
        for _ in range(total // len(block)):
            out.write(compressor.compress(block))
        out.write(compressor.flush())
    return path


# Decompression bombs and the work of one import


def test_a_zstd_file_of_a_gibibyte_of_newlines_is_refused(tmp_path):
    # The probe's bomb: 32 KB of zstd, 1 GiB of newlines, once 100% of a thread for minutes.
    bomb = zstd_of_blank_lines(tmp_path / "bomb.jsonl.zst", 1024**3)
    assert bomb.stat().st_size < 64 * 1024
    rollouts, errors = read(bomb)
    assert rollouts == []
    assert errors.messages == [f"{bomb}:10000001: file: the import is over 10000000 lines (blank lines count), "
                               "the most one import may read; stopped reading"]


@pytest.mark.parametrize("unit", [b"\n", b" \t\r\n"])
def test_a_gzip_file_of_blank_lines_is_refused(tmp_path, unit):
    bomb = gzip_of_blank_lines(tmp_path / "bomb.jsonl.gz", 256 * 1024**2, unit)
    _, errors = read(bomb)
    assert len(errors.messages) == 1
    assert "the import is over 10000000 lines (blank lines count)" in errors.messages[0]


def test_blank_lines_count_against_the_lines_of_one_import_across_its_files(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(lines(record(trajectory="t1")) + b"\n" * 500 + b"  \r\n" * 400)
    b = tmp_path / "b.jsonl"
    b.write_bytes(b"\n" * 98 + lines(record(trajectory="t2")) + b"\n" * 10)
    rollouts, errors = read(a, b, limits=Limits(import_lines=1000))  # a: 901 lines; b: 1000th on its 99th
    assert [r.trajectory_id for r in rollouts] == ["t1", "t2"]
    assert errors.messages == [f"{b}:100: file: the import is over 1000 lines (blank lines count), the most one "
                               "import may read; stopped reading"]


def test_blank_lines_skipped_in_bulk_keep_the_line_numbers_of_the_records_after_them(tmp_path):
    path = tmp_path / "r.jsonl.zst"
    data = b"\n" * 200_000 + b" \n\t\n" + b'{"group_id": "g"}\n' + b"\r\n" * 70_000 + lines(record(reward="x"))
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    _, errors = read(path)
    assert errors.messages == [f"{path}:200003: trajectory_id: missing (required)",
                               f"{path}:200003: reward: missing (required)",
                               f"{path}:200003: patch: missing (required)",
                               f"{path}:270004: reward: must be a number, got a string"]


def test_the_decompressed_bytes_of_one_import_are_bounded_across_its_files(tmp_path):
    a = tmp_path / "a.jsonl.gz"
    a.write_bytes(gzip.compress(lines(*[record(trajectory=f"t{i}") for i in range(100)])))
    b = tmp_path / "b.jsonl.gz"
    b.write_bytes(gzip.compress(lines(*[record(group="h", trajectory=f"t{i}") for i in range(100)])))
    size = len(gzip.decompress(a.read_bytes()))
    _, errors = read(a, b, limits=Limits(import_bytes=size + size // 2))
    assert len(errors.messages) == 1
    assert errors.messages[0].startswith(f"{b}:")
    assert errors.messages[0].endswith(f": file: the import is over {size + size // 2} bytes once decompressed, "
                                       "the most one import may read; stopped reading")


def test_one_endless_line_stops_at_the_bytes_of_the_import(tmp_path):
    path = zstd_of_blank_lines(tmp_path / "long.jsonl.zst", 256 * 1024**2, unit=b"x")
    _, errors = read(path, limits=Limits(import_bytes=64 * 1024**2))
    assert errors.messages == [f"{path}:1: file: the import is over 64 MiB once decompressed, the most one import "
                               "may read; stopped reading"]


def test_an_import_stops_at_its_hundredth_error_and_says_so(tmp_path):
    # The probe: 100 MB of bad lines took 137 s to reject.
    path = tmp_path / "bad.jsonl"
    bad = b'{"group_id": "g", "trajectory_id": 7, "reward": "x", "patch": null}\n'
    path.write_bytes(bad * (100 * 1024**2 // len(bad)))
    _, errors = read(path)
    assert errors.count == 100 and len(errors.messages) == 50
    summary = errors.summary().splitlines()
    assert summary[0] == f"{path}:1: trajectory_id: must be a string, got 7"
    assert summary[-1] == "... and 50 more errors not shown; stopped after 100 errors, the rest was not read"


def test_errors_under_the_cap_are_all_counted_and_not_said_to_stop(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(lines(*[record(trajectory=f"t{i}", reward="x") for i in range(60)]))
    _, errors = read(path)
    assert errors.count == 60
    assert errors.summary().endswith("\n... and 10 more errors not shown")
    with pytest.raises(Exception, match="10 more errors not shown") as raised:
        load_rollouts([path])
    assert type(raised.value).__name__ == "RolloutFormatError"


def test_an_error_limit_of_the_shown_errors_says_it_stopped_without_a_count_of_hidden_ones(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(lines(*[record(trajectory=f"t{i}", reward="x") for i in range(10)]))
    _, errors = read(path, limits=Limits(errors=3))
    assert errors.summary().splitlines()[-1] == "stopped after 3 errors, the rest was not read"


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="import_lines must be a positive integer, got 0"):
        Limits(import_lines=0)


# A whole JSON file (.traj, preds.json, a report) has the size limit of a line


def test_a_whole_json_file_over_the_line_limit_is_refused_unread(tmp_path):
    # The probe: a 302 KB zip carried a 310 MB patch in a .traj, and the web process took 850 MB.
    traj = swe_agent_traj(tmp_path / "runs" / "run-a" / "i1" / "i1.traj")
    data = json.loads(traj.read_text())
    data["info"]["submission"] = "+x\n" * (12 * 1024**2)  # 36 MiB
    traj.write_text(json.dumps(data))
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    tracemalloc.start()
    try:
        rollouts, errors, _ = read_format("swe-agent", [tmp_path / "runs" / "run-a"], [report])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rollouts == []
    assert errors == [f"{traj}: file: is {traj.stat().st_size} bytes, over the limit of 32 MiB for one JSON file "
                      "(a file of many items can be JSON Lines, where the limit is per line)"]
    assert peak < 8 * 1024**2


def test_whole_json_files_count_against_the_bytes_of_the_import(tmp_path):
    first = write_json(tmp_path / "a.json", {"k": "x" * 5000})
    second = write_json(tmp_path / "b.json", {"k": "y" * 5000})
    errors = ErrorLog(limits=Limits(import_bytes=8000))
    assert load_json(first, "a.json", errors) is not None
    with pytest.raises(ImportStopped):
        load_json(second, "b.json", errors)
    assert errors.messages == ["b.json: file: the import is over 8000 bytes once decompressed, the most one "
                               "import may read; stopped reading"]


# Files that are not regular files, and links that leave a run folder


def _finishes(target, timeout=10) -> bool:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


def _release(fifo):
    """Lets a reader blocked opening `fifo` go on (to an empty file), if one is."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    found = {}
    try:
        assert _finishes(lambda: found.update(result=read(fifo)))
    finally:
        _release(fifo)
    assert found["result"][1].messages == [f"{fifo}: file: is not a regular file (a FIFO, socket or device); "
                                           "only files are read"]


def test_a_fifo_in_a_run_folder_is_refused_not_waited_on(tmp_path):
    swe_agent_traj(tmp_path / "run-a" / "i1" / "i1.traj")
    fifo = tmp_path / "run-a" / "i2" / "i2.traj"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1", "i2"], "unresolved_ids": []})
    found = {}
    try:
        assert _finishes(lambda: found.update(result=read_format("swe-agent", [tmp_path / "run-a"], [report])))
    finally:
        _release(fifo)
    rollouts, errors, _ = found["result"]
    assert errors == [f"{fifo}: file: is not a regular file (a FIFO, socket or device); only files are read"]


def test_a_directory_named_as_a_file_is_refused(tmp_path):
    (tmp_path / "r.jsonl").mkdir()
    assert read(tmp_path / "r.jsonl")[1].messages == [f"{tmp_path / 'r.jsonl'}: file: is a directory, not a file"]


def test_a_traj_linked_from_outside_its_run_folder_is_refused(tmp_path):
    # The probe: a symbolic link in a run folder to a .traj elsewhere was followed and imported.
    swe_agent_traj(tmp_path / "run-a" / "i1" / "i1.traj")
    outside = swe_agent_traj(tmp_path / "elsewhere" / "i2.traj")
    link = tmp_path / "run-a" / "i2.traj"
    link.symlink_to(outside)
    inside = tmp_path / "run-a" / "i3.traj"
    inside.symlink_to(swe_agent_traj(tmp_path / "run-a" / "kept" / "i3.data"))  # a link inside the run is fine
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1", "i2", "i3"], "unresolved_ids": []})
    rollouts, errors, _ = read_format("swe-agent", [tmp_path / "run-a"], [report])
    assert errors == [f"{link}: file: is a link to a file outside the run folder {tmp_path / 'run-a'}; refused"]
    assert sorted(r.group_id for r in rollouts) == ["i1", "i3"]


def test_files_found_in_run_and_report_folders_are_refused_when_linked_from_outside(tmp_path):
    outside = write_lines(tmp_path / "elsewhere" / "output.jsonl", [openhands_row("i1", "a")])
    (tmp_path / "run-a").mkdir()
    (tmp_path / "run-a" / "output.jsonl").symlink_to(outside)
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    _, errors, _ = read_format("openhands", [tmp_path / "run-a"], [report])
    assert errors == [f"{tmp_path / 'run-a'}/output.jsonl: file: is a link to a file outside the run folder "
                      f"{tmp_path / 'run-a'}; refused"]

    preds, _ = swebench_run(tmp_path / "elsewhere", "run-b", {"i1": True})
    (tmp_path / "run-b").mkdir()
    (tmp_path / "run-b" / "all_preds.jsonl").symlink_to(preds)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "i1").mkdir()
    (tmp_path / "logs" / "i1" / "report.json").symlink_to(
        write_json(tmp_path / "elsewhere" / "report.json", {"i1": {"resolved": True}}))
    _, errors, _ = read_format("swebench", [tmp_path / "run-b"], [tmp_path / "logs"])
    assert errors == [
        f"{tmp_path / 'logs'}/i1/report.json: file: is a link to a file outside the report folder "
        f"{tmp_path / 'logs'}; refused",
        f"{tmp_path / 'run-b'}/all_preds.jsonl: file: is a link to a file outside the run folder "
        f"{tmp_path / 'run-b'}; refused",
    ]


# A key given twice


@pytest.mark.parametrize(("line", "key"), [
    ('{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "reward": 0}', "reward"),
    ('{"group_id": "g", "trajectory_id": "t", "reward" : 1, "patch": "", "reward": 0}', "reward"),
    ('{"group_id":"g","trajectory_id":"t","reward":1,"patch":"","meta":{"a":1,"b":{"c":1,"c":2}}}', "c"),
    ('{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "x": "a\\":1", "x": 2}', "x"),
    ('{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "k\\\\": 1, "k\\\\": 2}', "k\\"),
    ('{"group_id": "g", "trajectory_id": "t", "reward": NaN, "patch": "", "reward": 1}', "reward"),
    ('\ufeff{"group_id": "g", "group_id": "h", "trajectory_id": "t", "reward": 1, "patch": ""}', "group_id"),
])
def test_a_key_given_twice_is_refused_naming_it(tmp_path, line, key):
    # The probe: `"reward": 1, "reward": 0` was read as its last value.
    path = tmp_path / "r.jsonl"
    path.write_bytes(line.encode() + b"\n")
    rollouts, errors = read(path)
    assert rollouts == []
    assert errors.messages == [f"{path}:1: line: key {key!r} is given twice in one object"]


@pytest.mark.parametrize("line", [
    '{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "x": "a\\": \\"b\\":"}',
    '{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "k\\\\": "\\\\\\":", "m": {"k\\\\": 1}}',
    '{"group_id" : "g", "trajectory_id"\t:"t", "reward"\r:1, "patch": "", "meta": {"group_id": 1}}',
    '{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "messages": [{"role": "assistant", '
    '"tool_calls": [{"function": {"name": "bash", "arguments": "{\\"command\\": \\"ls\\", \\"cwd\\": \\"/\\"}"}}]}]}',
])
def test_the_same_key_in_different_objects_or_inside_strings_is_no_duplicate(tmp_path, line):
    path = tmp_path / "r.jsonl"
    path.write_bytes(line.encode() + b"\n")
    rollouts, errors = read(path)
    assert errors.messages == [] and len(rollouts) == 1


def test_a_whole_json_file_with_a_key_given_twice_is_refused(tmp_path):
    path = tmp_path / "preds.json"
    path.write_text('{"i1": {"instance_id": "i1", "model_patch": "a", "model_patch": "b"}}')
    errors = ErrorLog()
    assert load_json(path, "preds.json", errors) is None
    assert errors.messages == ["preds.json: file: key 'model_patch' is given twice in one object"]


def test_read_json_lines_refuses_a_key_given_twice_in_a_report(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_text('{"instance_id": "i1", "report": {"resolved": true, "resolved": false}}\n')
    errors = ErrorLog()
    assert list(read_json_lines(path, "eval.jsonl", errors)) == []
    assert errors.messages == ["eval.jsonl:1: line: key 'resolved' is given twice in one object"]


# Task fields are as long as their database columns allow, on every database


def test_task_repo_and_base_commit_longer_than_their_columns_are_refused(tmp_path):
    # The probe: a base_commit over 128 or a repo over 512 characters was a 500 on PostgreSQL.
    path = tmp_path / "r.jsonl"
    task = {"statement": "s", "repo": "r" * 513, "base_commit": "c" * 129, "id": "i" * 513}
    ok = {"statement": "s", "repo": "r" * 512, "base_commit": "c" * 128}
    path.write_bytes(lines(record(task=task), record(group="h", task=ok)))
    rollouts, errors = read(path)
    assert [r.group_id for r in rollouts] == ["h"]
    assert errors.messages == [
        f"{path}:1: task.id: is 513 characters long, over the limit of 512",
        f"{path}:1: task.repo: is 513 characters long, over the limit of 512",
        f"{path}:1: task.base_commit: is 129 characters long, over the limit of 128",
    ]


# Group size


def test_the_supported_group_size_is_fifty_thousand():
    assert MAX_GROUP_SIZE == CORE_MAX_GROUP_SIZE == Limits().group_size == 50_000


def test_a_group_over_the_maximum_size_is_refused_with_file_line_and_group(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(lines(*[record(trajectory=f"t{i}") for i in range(3)], record(group="h")))
    b = tmp_path / "b.jsonl"
    b.write_bytes(lines(record(trajectory="t3"), record(trajectory="t4"), record(group="h", trajectory="t2")))
    rollouts, errors = read(a, b, limits=Limits(group_size=3))
    assert errors.messages == [f"{b}:1: group_id: group 'g' has more than 3 trajectories, the most one group "
                               "may have"]
    assert {r.group_id for r in rollouts} == {"g", "h"}  # read, but the import fails: it has an error


def test_a_group_at_the_maximum_size_is_accepted(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(lines(*[record(trajectory=f"t{i}") for i in range(3)]))
    rollouts, errors = read(path, limits=Limits(group_size=3))
    assert errors.messages == [] and len(rollouts) == 3


# OpenHands events whose arguments have no compact JSON form


def _openhands(tmp_path, args):
    row = openhands_row("i1", "a")
    row["history"][1]["args"] = args
    out = tmp_path / "run-a" / "output.jsonl"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(row) + "\n")
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    return read_format("openhands", [out], [report]), out


def test_openhands_arguments_with_an_integer_beyond_64_bits_import_exactly(tmp_path):
    (rollouts, errors, _), _ = _openhands(tmp_path, {"command": "ls", "timeout": 2**64 + 1})
    assert errors == []
    call = rollouts[0].messages[1]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"command": "ls", "timeout": 2**64 + 1}


def test_openhands_arguments_with_a_lone_surrogate_are_an_error_not_a_crash(tmp_path):
    (rollouts, errors, _), out = _openhands(tmp_path, {"command": "\ud800"})
    assert rollouts == []
    assert errors == [f"{out}:1: history[1].args: contains an unpaired surrogate escape"]


@pytest.mark.parametrize("depth", [300, 700, 950, 5000])
def test_openhands_arguments_nested_deeply_are_read_or_refused_never_a_crash(tmp_path, depth):
    args = {}
    inner = args
    for _ in range(depth):
        inner["x"] = {}
        inner = inner["x"]
    (rollouts, errors, _), out = _openhands(tmp_path, args) if depth < 900 else _deep_text(tmp_path, depth)
    if rollouts:
        assert errors == []
        assert json.loads(rollouts[0].messages[1]["tool_calls"][0]["function"]["arguments"]) == args
    else:
        assert len(errors) == 1 and errors[0].startswith(f"{out}:1: ") and "nested too deeply" in errors[0]


def _deep_text(tmp_path, depth):
    """An output.jsonl row whose arguments nest `depth` deep, written as text (json.dumps cannot)."""
    row = openhands_row("i1", "a")
    row["history"][1]["args"] = "ARGS"
    out = tmp_path / "run-a" / "output.jsonl"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(row).replace('"ARGS"', '{"x": ' * depth + "{}" + "}" * depth) + "\n")
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    return read_format("openhands", [out], [report]), out


def test_openhands_v1_actions_without_arguments_text_are_written_exactly(tmp_path):
    row = openhands_v1_row("i1", "a")
    event = next(e for e in row["history"] if e["kind"] == "ActionEvent")
    del event["tool_call"]
    event["action"] = {"kind": "TerminalAction", "timeout": 2**70}
    out = write_lines(tmp_path / "run-a" / "output.jsonl", [row])
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    rollouts, errors, _ = read_format("openhands", [out], [report])
    assert errors == []
    call = next(m for m in rollouts[0].messages if m.get("tool_calls"))["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"kind": "TerminalAction", "timeout": 2**70}


_KEYS = st.sampled_from(["a", "b", 'q":', "k\\", "k\\\\", '\\":', "x y", "é"])
_SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(['\\":', '"', ":", '{"a": 1}', "a\\"])
_PAIRS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3).map(lambda items: ("list", items))
                      | st.lists(st.tuples(_KEYS, inner), max_size=4).map(lambda pairs: ("object", pairs)),
                      max_leaves=12)


def _text(value, spaced) -> str:
    """JSON text of a value from _PAIRS (objects as lists of pairs, so a key may come twice)."""
    if isinstance(value, tuple) and value[0] == "list":
        return "[" + ",".join(_text(v, spaced) for v in value[1]) + "]"
    if isinstance(value, tuple):
        colon = " :" if spaced else ":"
        return "{" + ",".join(json.dumps(k) + colon + _text(v, spaced) for k, v in value[1]) + "}"
    return json.dumps(value)


def _reference(text):
    """What a strict reader says: the first key given twice, or None."""
    def pairs(items):
        keys = [k for k, _ in items]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise KeyError(key)
        return dict(items)

    try:
        json.loads(text, object_pairs_hook=pairs)
    except KeyError as twice:
        return twice.args[0]
    return None


@given(pairs=st.lists(st.tuples(_KEYS, _PAIRS), max_size=5), spaced=st.booleans())
@hyp_settings(max_examples=400, deadline=None)
def test_a_key_given_twice_is_found_whatever_the_strings_and_spacing_hold(pairs, spaced):
    text = _text(("object", pairs), spaced)
    got = _Decoder().decode(text.encode(), first=False)
    twice = _reference(text)
    if twice is None:
        assert got == json.loads(text)
    else:
        assert got == f"key {twice!r} is given twice in one object"
