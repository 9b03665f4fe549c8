from tests.grading.formats.formatfiles import openhands_eval_row, openhands_row, write_json, write_lines
from tests.grading.formats.helpers import by_group, read


def test_it_reads_output_jsonl_with_its_report_as_groups_per_instance(tmp_path):
    a = write_lines(tmp_path / "run-a" / "output.jsonl", [openhands_row("i1", "a"), openhands_row("i2", "a")])
    b = write_lines(tmp_path / "run-b" / "output.jsonl", [openhands_row("i1", "b"), openhands_row("i2", "b", patch="")])
    ra = write_json(tmp_path / "run-a" / "report.json", {"resolved_ids": ["i1"], "unresolved_ids": ["i2"]})
    rb = write_json(tmp_path / "run-b" / "report.json", {"resolved_ids": [], "unresolved_ids": ["i1"],
                                                         "empty_patch_ids": ["i2"]})
    rollouts, errors, notes = read("openhands", [a, b], [ra, rb])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"run-a": 1.0, "run-b": 0.0}, "i2": {"run-a": 0.0}}
    assert notes.lines() == ["skipped 1 (empty patch): run-b/i2"]
    first = rollouts[0]
    assert first.task.statement == "Fix i1." and first.task.reference_patch.endswith("+gold\n")
    assert first.metrics == {"num_turns": 1, "cost": 0.25}
    assert first.messages == [
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "content": "Running command: ls", "tool_calls": [
            {"id": "1", "type": "function",
             "function": {"name": "run", "arguments": '{"command":"ls","thought":"Look."}'}}]},
        {"role": "tool", "content": "a.py", "tool_call_id": "1"},
    ]


def test_it_names_the_line_and_key_of_a_bad_row(tmp_path):
    row = openhands_row("i1", "a")
    del row["test_result"]
    other = openhands_row("i2", "a")
    other["history"].append({"id": 3})
    out = write_lines(tmp_path / "run" / "output.jsonl", [row, other])
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i1", "i2"], "unresolved_ids": []})
    _, errors, _ = read("openhands", [out], [report])
    assert errors == [f"{out}:1: test_result: missing", f"{out}:2: history[3]: neither an action nor an observation"]


def test_its_own_evaluation_output_gives_the_verdicts_and_a_run_folder_may_stand_for_its_output(tmp_path):
    rows = [openhands_row(i, "a") for i in ("ok", "no", "empty", "broken", "slow", "unapplied")]
    write_lines(tmp_path / "run-a" / "output.jsonl", rows)
    report = write_lines(tmp_path / "run-a" / "output.swebench_eval.jsonl", [
        openhands_eval_row("ok", True), openhands_eval_row("no", False),
        openhands_eval_row("empty", False, empty_generation=True), openhands_eval_row("broken", False, error_eval=True),
        openhands_eval_row("slow", False, test_timeout=True),
        openhands_eval_row("unapplied", False, failed_apply_patch=True)])
    rollouts, errors, notes = read("openhands", [tmp_path / "run-a"], [report])
    assert errors == []
    assert by_group(rollouts) == {"ok": {"run-a": 1.0}, "no": {"run-a": 0.0}, "unapplied": {"run-a": 0.0}}
    assert notes.lines() == ["skipped 1 (empty patch): run-a/empty",
                             "skipped 2 (evaluation error, no verdict): run-a/broken, run-a/slow"]


def test_a_bad_evaluation_output_row_is_named_by_line_and_key(tmp_path):
    out = write_lines(tmp_path / "run-a" / "output.jsonl", [openhands_row("i1", "a")])
    bad = openhands_eval_row("i1", True)
    bad["test_result"]["report"]["resolved"] = "yes"
    report = write_lines(tmp_path / "eval.jsonl", [openhands_eval_row("i0", True), bad, {"instance_id": "i2"}])
    _, errors, _ = read("openhands", [out], [report])
    assert errors == [f"{report}:2: test_result.report.resolved: must be true or false, got a string",
                      f"{report}:3: test_result: missing"]
