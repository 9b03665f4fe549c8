from tests.grading.formats.agentruns import (
    harness_run_report,
    opendevin_row,
    openhands_0_3x_row,
    openhands_eval_row,
    openhands_row,
    openhands_v1_row,
)
from tests.grading.formats.formatfiles import write_json, write_lines
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


def test_an_opendevin_output_with_top_level_patch_and_history_pairs_reads(tmp_path):
    out = write_lines(tmp_path / "CodeActAgent" / "gpt-4o_maxiter_30_N_v1.5" / "output.jsonl",
                      [opendevin_row("i1", "a"), opendevin_row("i2", "a", patch="")])
    report = harness_run_report(tmp_path / "report.json", ["i1"], [], empty=["i2"])
    rollouts, errors, notes = read("openhands", [out], [report])
    assert errors == []
    (only,) = rollouts
    assert (only.group_id, only.trajectory_id, only.reward) == ("i1", "gpt-4o_maxiter_30_N_v1.5", 1.0)
    assert only.patch.endswith("+a\n") and only.task.statement == "Fix i1."
    # the null observation answering the user's message is no turn
    assert [m["role"] for m in only.messages] == ["user", "assistant", "tool"]
    assert notes.lines() == ["skipped 1 (empty patch): gpt-4o_maxiter_30_N_v1.5/i2"]


def test_later_0x_events_give_the_system_prompt_and_token_counts(tmp_path):
    out = write_lines(tmp_path / "run" / "output.jsonl", [openhands_0_3x_row("i1", "run")])
    rollouts, errors, _ = read("openhands", [out], [harness_run_report(tmp_path / "report.json", ["i1"])])
    assert errors == []
    (only,) = rollouts
    assert [m["role"] for m in only.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert only.messages[0] == {"role": "system", "content": "You are OpenHands agent."}
    assert only.messages[3]["tool_call_id"] == only.messages[2]["tool_calls"][0]["id"] == "3"
    assert only.metrics == {"cost": 0.25, "input_tokens": 900, "output_tokens": 80, "num_turns": 2}


def test_v1_sdk_events_read_as_chat_messages(tmp_path):
    write_lines(tmp_path / "run-v1" / "output.jsonl", [openhands_v1_row("i1", "v1")])
    report = harness_run_report(tmp_path / "run-v1" / "output.report.json", [], ["i1"])
    rollouts, errors, _ = read("openhands", [tmp_path / "run-v1"], [report])
    assert errors == []
    (only,) = rollouts
    assert (only.trajectory_id, only.reward, only.task.statement) == ("run-v1", 0.0, "Fix i1.")
    def text(value):
        return [{"type": "text", "text": value, "cache_prompt": False}]

    assert only.messages[0] == {"role": "system", "content": [{"type": "text", "text": "You are OpenHands agent."}]}
    assert only.messages[2] == {"role": "assistant", "content": text("Look."),
                                "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
                                    "name": "terminal", "arguments": '{"command": "ls"}'}}]}
    assert only.messages[3] == {"role": "tool", "content": text("a.py"), "tool_call_id": "toolu_1"}
    # the state update is no turn; the agent's error answers its call
    assert only.messages[4] == {"role": "tool", "content": "bad arguments", "tool_call_id": "toolu_2"}
    assert only.metrics == {"cost": 0.3, "input_tokens": 700, "output_tokens": 60, "num_turns": 1}


def test_an_output_updated_with_its_evaluation_is_its_own_report(tmp_path):
    rows = [openhands_row("i1", "a"), openhands_row("i2", "a")]
    rows[0]["report"] = {"empty_generation": False, "resolved": True, "failed_apply_patch": False,
                         "error_eval": False, "test_timeout": False}
    rows[1]["report"] = {**rows[0]["report"], "resolved": False}
    out = write_lines(tmp_path / "run-a" / "output.jsonl", rows)
    rollouts, errors, _ = read("openhands", [out], [out])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"run-a": 1.0}, "i2": {"run-a": 0.0}}


def test_a_failed_instance_without_history_or_patch_is_skipped_as_an_empty_patch(tmp_path):
    failed = {"instance_id": "i2", "test_result": {}, "history": None, "metrics": None,
              "error": "RuntimeError: agent stuck", "instance": None}
    out = write_lines(tmp_path / "run-a" / "output.jsonl", [openhands_row("i1", "a"), failed])
    report = harness_run_report(tmp_path / "report.json", ["i1"], [], empty=["i2"])
    rollouts, errors, notes = read("openhands", [out], [report])
    assert errors == []
    assert [r.group_id for r in rollouts] == ["i1"]
    assert notes.lines() == ["skipped 1 (empty patch): run-a/i2"]
