from grading.formats import FORMATS
from tests.grading.formats.formatfiles import swebench_run
from tests.grading.formats.helpers import read


def test_the_registry_names_every_format():
    assert list(FORMATS) == ["jsonl", "swebench", "swe-agent", "openhands", "verl"]


def test_reports_pair_with_runs_one_each(tmp_path):
    a = swebench_run(tmp_path, "a", {"i1": True})
    b = swebench_run(tmp_path, "b", {"i1": True})
    _, errors, _ = read("swebench", [a[0], b[0]], [a[1]])
    assert errors == ["--report: report: format swebench needs one evaluation report per run, in the "
                      "order of the runs: got 1 for 2 runs"]


def test_formats_that_carry_rewards_take_no_report_and_some_take_no_tasks(tmp_path):
    a = swebench_run(tmp_path, "a", {"i1": True})
    _, errors, _ = read("verl", [a[0]], [a[1]], [a[1]])
    assert errors == ["--report: report: format verl carries its rewards; it takes no evaluation report",
                      "--tasks: tasks: format verl takes no task file"]


def test_an_unknown_format_is_named(tmp_path):
    _, errors, _ = read("parquet", [tmp_path / "x"])
    assert errors == ["--from: format: unknown format 'parquet'; known: jsonl, swebench, swe-agent, openhands, verl"]
