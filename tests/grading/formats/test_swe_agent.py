from tests.grading.formats.formatfiles import swe_agent_traj, swebench_tasks, write_json
from tests.grading.formats.helpers import by_group, read


def report(path, resolved, unresolved):
    return write_json(path, {"resolved_ids": resolved, "unresolved_ids": unresolved})


def test_it_reads_run_folders_of_traj_files_with_their_reports(tmp_path):
    for run in ("run-a", "run-b"):
        swe_agent_traj(tmp_path / run / "i1.traj")
        swe_agent_traj(tmp_path / run / "i2" / "i2.traj")
    a = report(tmp_path / "a.json", ["i1"], ["i2"])
    b = report(tmp_path / "b.json", ["i2"], ["i1"])
    tasks = swebench_tasks(tmp_path / "tasks.json.jsonl", ["i1", "i2"])
    rollouts, errors, notes = read("swe-agent", [tmp_path / "run-a", tmp_path / "run-b"], [a, b], [tasks])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"run-a": 1.0, "run-b": 0.0}, "i2": {"run-a": 0.0, "run-b": 1.0}}
    first = rollouts[0]
    assert first.patch.endswith("+run-a\n")
    assert first.metrics == {"cost": 0.5, "num_turns": 2, "input_tokens": 900, "output_tokens": 80, "steps": 2}
    assert first.meta == {"exit_status": "submitted"}
    assert first.messages[:2] == [
        {"role": "assistant", "content": "Look around.",
         "tool_calls": [{"id": "step-0", "type": "function", "function": {"name": "action", "arguments": "ls"}}]},
        {"role": "tool", "content": "a.py", "tool_call_id": "step-0"},
    ]
    assert first.task.statement == "Fix i1."


def test_it_reads_mini_swe_agent_trajectories_by_their_instance_id(tmp_path):
    swe_agent_traj(tmp_path / "mini" / "x" / "x.traj.json", "django__django-1", mini=True)
    unresolved = report(tmp_path / "r.json", [], ["django__django-1"])
    rollouts, errors, _ = read("swe-agent", [tmp_path / "mini"], [unresolved])
    assert errors == []
    (only,) = rollouts
    assert (only.group_id, only.trajectory_id, only.reward) == ("django__django-1", "mini", 0.0)
    assert [m["role"] for m in only.messages] == ["system", "user", "assistant", "user"]


def test_empty_submissions_and_missing_verdicts_are_skipped_and_reported(tmp_path):
    swe_agent_traj(tmp_path / "run" / "i1.traj")
    swe_agent_traj(tmp_path / "run" / "i2.traj", submission=None)
    swe_agent_traj(tmp_path / "run" / "i3.traj")
    rollouts, errors, notes = read("swe-agent", [tmp_path / "run"], [report(tmp_path / "r.json", ["i1"], [])])
    assert errors == []
    assert [r.group_id for r in rollouts] == ["i1"]
    assert notes.lines() == ["skipped 1 (empty patch): run/i2",
                             "skipped 1 (no verdict in the evaluation report): run/i3"]


def test_it_names_the_file_and_key_of_what_it_cannot_read(tmp_path):
    runs = tmp_path / "runs"
    write_json(runs / "a.traj", {"info": {"exit_status": "error"}, "trajectory": []})
    write_json(runs / "b.traj", {"info": {"submission": "diff"}, "trajectory": [{"thought": "x"}]})
    write_json(runs / "c.traj", {"info": {"submission": "diff"}})
    write_json(runs / "d.traj", [1])
    (runs / "e.traj").write_text("{")
    _, errors, _ = read("swe-agent", [runs], [report(tmp_path / "r.json", ["a", "b", "c"], [])])
    assert errors == [
        f"{runs}/a.traj: info.submission: missing",
        f"{runs}/b.traj: trajectory[0].action: missing",
        f"{runs}/c.traj: trajectory: missing (a SWE-agent .traj has `trajectory`, a mini-swe-agent one `messages`)",
        f"{runs}/d.traj: file: must be a JSON object, got an array",
        f"{runs}/e.traj:1: file: not valid JSON: Expecting property name enclosed in double quotes at column 2",
    ]


def test_a_folder_without_trajectories_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    _, errors, _ = read("swe-agent", [tmp_path / "empty"], [report(tmp_path / "r.json", [], [])])
    assert errors == [f"{tmp_path}/empty: file: folder holds no .traj or .traj.json file"]
