import pytest

from tests.grading.formats.agentruns import experiments_run, harness_run_report, swe_agent_1_traj
from tests.grading.formats.formatfiles import swebench_run, swebench_tasks, write_json, write_lines
from tests.grading.formats.helpers import by_group, read


@pytest.mark.parametrize("report", ["harness", "results", "per-instance"])
def test_it_reads_runs_as_one_group_per_instance_and_one_trajectory_per_run(tmp_path, report):
    a = swebench_run(tmp_path, "run-a", {"i1": True, "i2": False}, report=report)
    b = swebench_run(tmp_path, "run-b", {"i1": False, "i2": True}, report=report)
    rollouts, errors, notes = read("swebench", [a[0], b[0]], [a[1], b[1]])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"run-a": 1.0, "run-b": 0.0}, "i2": {"run-a": 0.0, "run-b": 1.0}}
    assert [r.passed for r in rollouts] == [True, False, False, True]
    assert rollouts[0].patch.endswith("+run-a\n")
    assert notes.lines() == []


def test_several_runs_of_one_model_are_refused_unless_named_by_their_run(tmp_path):
    runs = [swebench_run(tmp_path, run, {"i1": ok}) for run, ok in (("sample-1", True), ("sample-2", False))]
    for preds, _ in runs:  # one policy sampled twice: the same model name in both runs
        preds.write_text(preds.read_text().replace(f'"{preds.parent.name}"', '"policy-7"'))
    paths, reports = [preds for preds, _ in runs], [report for _, report in runs]
    rollouts, errors, _ = read("swebench", paths, reports)
    assert errors == [f"{paths[1]}:1: model_name_or_path: 'policy-7' of instance 'i1' is also in {paths[0]}: "
                      "for several runs of one model, name each trajectory by its run (--name-by-run)"]
    rollouts, errors, _ = read("swebench", paths, reports, name_by_run=True)
    assert errors == []
    assert by_group(rollouts) == {"i1": {"sample-1": 1.0, "sample-2": 0.0}}
    _, errors, _ = read("swe-agent", [tmp_path], [reports[0]], name_by_run=True)
    assert errors == ["--name-by-run: name_by_run: format swe-agent names trajectories by their run already; "
                      "--name-by-run is for swebench"]


def test_it_skips_empty_patches_and_instances_without_a_verdict_and_says_so(tmp_path):
    preds, report = swebench_run(tmp_path, "run-a", {"i1": True, "i2": None, "i3": False}, empty=("i4",))
    rollouts, errors, notes = read("swebench", [preds], [report])
    assert errors == []
    assert [r.group_id for r in rollouts] == ["i1", "i3"]
    assert notes.lines() == ["skipped 1 (no verdict in the evaluation report): run-a/i2",
                             "skipped 1 (empty patch): run-a/i4"]


def test_tasks_give_each_group_its_statement_and_reference_patch_once(tmp_path):
    a = swebench_run(tmp_path, "run-a", {"i1": True, "i2": False})
    b = swebench_run(tmp_path, "run-b", {"i1": False})
    tasks = swebench_tasks(tmp_path / "tasks.jsonl", ["i1", "i2"])
    rollouts, errors, _ = read("swebench", [a[0], b[0]], [a[1], b[1]], [tasks])
    assert errors == []
    with_task = [(r.group_id, r.trajectory_id) for r in rollouts if r.task is not None]
    assert with_task == [("i1", "run-a"), ("i2", "run-a")]
    task = rollouts[0].task
    assert (task.id, task.statement, task.repo, task.extra) == ("i1", "Fix i1.", "o/r", {"version": "1.0"})
    assert task.reference_patch.endswith("+gold\n")


def test_a_json_predictions_file_keyed_by_instance_reads_like_jsonl(tmp_path):
    preds = write_json(tmp_path / "preds.json", {
        "i1": {"instance_id": "i1", "model_name_or_path": "m", "model_patch": "diff a"},
        "i2": {"instance_id": "i2", "model_name_or_path": "m", "model_patch": "diff b"}})
    report = write_json(tmp_path / "report.json", {"resolved_ids": ["i2"], "unresolved_ids": ["i1"]})
    rollouts, errors, _ = read("swebench", [preds], [report])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"m": 0.0}, "i2": {"m": 1.0}}


def test_it_names_the_file_line_and_key_of_each_bad_prediction(tmp_path):
    preds = write_lines(tmp_path / "p.jsonl", [
        {"instance_id": "i1", "model_name_or_path": "m"},
        {"instance_id": 7, "model_name_or_path": "m", "model_patch": "diff"},
        "{not json",
    ])
    report = write_json(tmp_path / "r.json", {"resolved_ids": [], "unresolved_ids": ["i1"]})
    _, errors, _ = read("swebench", [preds], [report])
    assert errors == [f"{preds}:2: instance_id: must be a string, got 7",
                      f"{preds}:3: line: not valid JSON: Expecting property name enclosed in double quotes at column 2"]


def test_a_missing_model_patch_is_an_empty_patch_not_an_error(tmp_path):
    preds = write_lines(tmp_path / "p.jsonl", [{"instance_id": "i1", "model_name_or_path": "m"}])
    report = write_json(tmp_path / "r.json", {"resolved_ids": [], "unresolved_ids": ["i1"]})
    _, errors, notes = read("swebench", [preds], [report])
    assert errors == [f"{preds}: file: nothing to import, every item was skipped: skipped 1 (empty patch): m/i1"]


def test_it_says_what_is_wrong_with_a_report(tmp_path):
    preds, _ = swebench_run(tmp_path, "run-a", {"i1": True})
    not_json = tmp_path / "bad.json"
    not_json.write_text('{"resolved_ids": [')
    unknown = write_json(tmp_path / "unknown.json", {"passed": ["i1"]})
    wrong_ids = write_json(tmp_path / "ids.json", {"resolved_ids": "i1", "unresolved_ids": []})
    for report, message in [
        (not_json, f"{not_json}:1: file: not valid JSON: Expecting value at column 19"),
        (unknown, f"{unknown}: report: not a SWE-bench evaluation report: expected resolved_ids "
                  "(harness run report), a resolved list (results.json) or "
                  "{instance_id: {resolved: ...}} (per-instance report.json)"),
        (wrong_ids, f"{wrong_ids}: resolved_ids: must be an array of instance ids (strings)"),
    ]:
        _, errors, _ = read("swebench", [preds], [report])
        assert errors[0] == message


def test_an_instance_missing_from_the_task_file_is_an_error(tmp_path):
    preds, report = swebench_run(tmp_path, "run-a", {"i1": True})
    tasks = swebench_tasks(tmp_path / "tasks.jsonl", ["other"])
    _, errors, _ = read("swebench", [preds], [report], [tasks])
    assert errors == [f"{preds}:1: instance_id: 'i1' is not in the task file {tasks}"]


def test_two_predictions_of_one_run_for_one_instance_are_an_error(tmp_path):
    preds = write_lines(tmp_path / "p.jsonl", [
        {"instance_id": "i1", "model_name_or_path": "m", "model_patch": "diff a"},
        {"instance_id": "i1", "model_name_or_path": "m", "model_patch": "diff b"}])
    report = write_json(tmp_path / "r.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    _, errors, _ = read("swebench", [preds], [report])
    assert errors == [f"{preds}:2: trajectory_id: 'm' of group 'i1' already appeared at {preds}:1"]


def test_an_experiments_run_folder_reads_with_its_results_json(tmp_path):
    run = experiments_run(tmp_path / "evaluation" / "lite" / "20240620_agent_model",
                          {"i1": True, "i2": False, "i3": None}, empty=("i4",))
    rollouts, errors, notes = read("swebench", [run], [run / "results" / "results.json"])
    assert errors == []
    # results.json names only the resolved: the rest of the run is unresolved, as the repository counts it
    assert by_group(rollouts) == {"i1": {"20240620_agent_model": 1.0}, "i2": {"20240620_agent_model": 0.0}}
    assert rollouts[0].source == f"{run}/all_preds.jsonl"
    assert notes.lines() == ["skipped 1 (evaluation error, no verdict): 20240620_agent_model/i3",
                             "skipped 1 (empty patch): 20240620_agent_model/i4"]


def test_the_per_instance_reports_of_an_experiments_run_give_the_same_verdicts(tmp_path):
    run = experiments_run(tmp_path / "20240620_agent_model", {"i1": True, "i2": False})
    rollouts, errors, _ = read("swebench", [run / "all_preds.jsonl"], [run / "logs"])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"20240620_agent_model": 1.0}, "i2": {"20240620_agent_model": 0.0}}


def test_swe_agent_1_preds_json_reads_with_the_harness_run_report(tmp_path):
    run = tmp_path / "sweagent-run"
    for instance in ("i1", "i2", "i3"):
        swe_agent_1_traj(run, instance)
    write_json(run / "preds.json", {i: {"model_name_or_path": "sweagent-run", "instance_id": i,
                                        "model_patch": f"diff {i}"} for i in ("i1", "i2", "i3")})
    report = harness_run_report(tmp_path / "sweagent-run.eval-1.json", ["i1"], ["i2"], incomplete=["i3"])
    rollouts, errors, notes = read("swebench", [run], [report])
    assert errors == []
    assert by_group(rollouts) == {"i1": {"sweagent-run": 1.0}, "i2": {"sweagent-run": 0.0}}
    assert notes.lines() == ["skipped 1 (no verdict in the evaluation report): sweagent-run/i3"]


def test_a_run_folder_needs_exactly_one_predictions_file(tmp_path):
    report = write_json(tmp_path / "r.json", {"resolved_ids": [], "unresolved_ids": []})
    (tmp_path / "none").mkdir()
    write_lines(tmp_path / "both" / "all_preds.jsonl", [])
    write_json(tmp_path / "both" / "preds.json", {})
    for folder, reason in [("none", "holds neither all_preds.jsonl nor preds.json"),
                           ("both", "holds both all_preds.jsonl and preds.json")]:
        _, errors, _ = read("swebench", [tmp_path / folder], [report])
        assert errors == [f"{tmp_path}/{folder}: file: a run folder must hold one predictions file; it {reason}"]
