import pytest

from tests.grading.formats.agentruns import (
    experiments_run,
    harness_run_report,
    mini_swe_agent_traj,
    swe_agent_0_traj,
    swe_agent_1_traj,
)
from tests.grading.formats.formatfiles import swebench_tasks, write_json
from tests.grading.formats.helpers import by_group, read


def report(path, resolved, unresolved):
    return write_json(path, {"resolved_ids": resolved, "unresolved_ids": unresolved})


def test_it_reads_swe_agent_0_run_folders_with_their_reports(tmp_path):
    for run in ("run-a", "run-b"):
        swe_agent_0_traj(tmp_path / run / "i1.traj")
        swe_agent_0_traj(tmp_path / run / "i2.traj")
    a = report(tmp_path / "a.json", ["i1"], ["i2"])
    b = harness_run_report(tmp_path / "b.json", ["i2"], ["i1"])
    tasks = swebench_tasks(tmp_path / "tasks.jsonl", ["i1", "i2"])
    rollouts, errors, notes = read("swe-agent", [tmp_path / "run-a", tmp_path / "run-b"], [a, b], [tasks])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"run-a": 1.0, "run-b": 0.0}, "i2": {"run-a": 0.0, "run-b": 1.0}}
    first = rollouts[0]
    assert first.patch.endswith("+run-a\n")
    assert first.metrics == {"cost": 0.5, "num_turns": 2, "input_tokens": 900, "output_tokens": 80, "steps": 2}
    assert first.meta == {"exit_status": "submitted"}
    # the history as the model saw it, its demonstration left out
    assert [(m["role"], m["content"][:10]) for m in first.messages] == [
        ("system", "SETTING: Y"), ("user", "We're curr"), ("assistant", "Look aroun"), ("user", "a.py\n(Open"),
        ("assistant", "Submit.\n``")]
    assert first.task.statement == "Fix i1."


def test_a_swe_agent_0_trajectory_without_a_submission_is_skipped_as_an_empty_patch(tmp_path):
    swe_agent_0_traj(tmp_path / "run" / "i1.traj")
    swe_agent_0_traj(tmp_path / "run" / "i2.traj", submission=None)
    swe_agent_0_traj(tmp_path / "run" / "i3.traj")
    rollouts, errors, notes = read("swe-agent", [tmp_path / "run"], [report(tmp_path / "r.json", ["i1"], [])])
    assert errors == []
    assert [r.group_id for r in rollouts] == ["i1"]
    assert notes.lines() == ["skipped 1 (empty patch): run/i2",
                             "skipped 1 (no verdict in the evaluation report): run/i3"]


def test_it_reads_swe_agent_1_instance_folders_with_tool_calls(tmp_path):
    run = tmp_path / "default__gpt-4o__t-0.00__p-1.00__c-3.00___swe_bench_lite_test"
    swe_agent_1_traj(run, "o__r-1")
    swe_agent_1_traj(run, "o__r-2", submission=None)
    write_json(run / "preds.json", {})
    rollouts, errors, notes = read("swe-agent", [run], [report(tmp_path / "r.json", [], ["o__r-1", "o__r-2"])])
    assert errors == []
    (only,) = rollouts
    assert (only.group_id, only.trajectory_id, only.reward) == ("o__r-1", run.name, 0.0)
    assert notes.lines() == [f"skipped 1 (empty patch): {run.name}/o__r-2"]
    assert [m["role"] for m in only.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert only.messages[1]["content"] == [{"type": "text", "text": "<pr_description>Fix o__r-1.</pr_description>"}]
    call = only.messages[2]["tool_calls"][0]
    assert call["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert only.messages[3] == {"role": "tool", "content": "OBSERVATION:\na.py", "tool_call_id": call["id"]}


def test_a_retry_agents_attempts_are_not_read_twice_and_one_file_names_its_run(tmp_path):
    run = tmp_path / "retry-run"
    traj = swe_agent_1_traj(run, "o__r-1", attempts=2)
    resolved = report(tmp_path / "r.json", ["o__r-1"], [])
    for path in (run, traj):
        rollouts, errors, _ = read("swe-agent", [path], [resolved])
        assert errors == []
        assert by_group(rollouts) == {"o__r-1": {"retry-run": 1.0}}


@pytest.mark.parametrize("version", ["1", "2", "2-responses"])
def test_it_reads_mini_swe_agent_trajectories_of_each_version(tmp_path, version):
    path = mini_swe_agent_traj(tmp_path / "mini" / "django__django-1" / "django__django-1.traj.json",
                               "django__django-1", version=version)
    unresolved = report(tmp_path / "r.json", [], ["django__django-1"])
    rollouts, errors, _ = read("swe-agent", [path], [unresolved])
    assert errors == []
    (only,) = rollouts
    assert (only.group_id, only.trajectory_id, only.reward) == ("django__django-1", "mini", 0.0)
    assert only.metrics == {"cost": 0.5, "num_turns": 2}
    roles = [m["role"] for m in only.messages]
    if version == "1":
        assert roles == ["system", "user", "assistant", "user"]
    elif version == "2":
        assert roles == ["system", "user", "assistant", "tool", "exit"]
        assert only.messages[3]["tool_call_id"] == only.messages[2]["tool_calls"][0]["id"] == "call_1"
        assert all("extra" not in m for m in only.messages)
    else:
        assert roles == ["system", "user", "assistant", "tool"]
        assert only.messages[2] == {"role": "assistant", "content": [{"type": "output_text", "text": "Look."}],
                                    "tool_calls": [{"id": "call_1", "type": "function", "function": {
                                        "name": "bash", "arguments": '{"command": "ls"}'}}]}
        assert only.messages[3] == {"role": "tool", "content": "a.py", "tool_call_id": "call_1"}


def test_the_trajs_folder_of_an_experiments_run_is_named_by_its_run(tmp_path):
    run = experiments_run(tmp_path / "evaluation" / "lite" / "20240402_agent_model", {"i1": True, "i2": False})
    results = run / "results" / "results.json"
    for path in (run, run / "trajs"):
        rollouts, errors, _ = read("swe-agent", [path], [results])
        assert errors == []
        assert by_group(rollouts) == {"i1": {"20240402_agent_model": 1.0}, "i2": {"20240402_agent_model": 0.0}}


def test_it_names_the_file_and_key_of_what_it_cannot_read(tmp_path):
    runs = tmp_path / "runs"
    write_json(runs / "a.traj", {"history": [], "trajectory": []})
    write_json(runs / "b.traj", {"info": {"submission": "diff"}, "history": [{"content": "x"}]})
    write_json(runs / "c.traj", {"info": {"submission": "diff"}, "trajectory": []})
    write_json(runs / "d.traj", [1])
    (runs / "e.traj").write_text("{")
    write_json(runs / "f.traj.json", {"info": {"submission": 7}, "messages": [{"type": "reasoning"}]})
    _, errors, _ = read("swe-agent", [runs], [report(tmp_path / "r.json", ["a", "b", "c", "f"], [])])
    assert errors == [
        f"{runs}/a.traj: info: missing",
        f"{runs}/b.traj: history[0].role: missing",
        f"{runs}/c.traj: history: missing (a SWE-agent .traj has `history`, a mini-swe-agent one `messages`)",
        f"{runs}/d.traj: file: must be a JSON object, got an array",
        f"{runs}/e.traj:1: file: not valid JSON: Expecting property name enclosed in double quotes at column 2",
        f"{runs}/f.traj.json: info.submission: must be a string, got 7",
        f"{runs}/f.traj.json: messages[0]: neither a chat message (no role) nor a Responses API item "
        "(type 'reasoning')",
    ]


def test_a_folder_without_trajectories_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    _, errors, _ = read("swe-agent", [tmp_path / "empty"], [report(tmp_path / "r.json", [], [])])
    assert errors == [f"{tmp_path}/empty: file: folder holds no .traj or .traj.json file"]
