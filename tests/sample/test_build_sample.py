"""sample/build_sample.py against the committed sample/rollouts.jsonl; no Django involved."""

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "sample"


def run_check(sample_dir: Path) -> subprocess.CompletedProcess:
    script = sample_dir / "build_sample.py"
    return subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True, timeout=120)


def test_it_builds_the_committed_rollouts():
    proc = run_check(SAMPLE)
    assert proc.returncode == 0, proc.stderr


def test_each_task_file_is_one_group_and_each_run_one_line():
    tasks = [tomllib.loads(path.read_text(encoding="utf-8")) for path in sorted((SAMPLE / "tasks").glob("*.toml"))]
    records = [json.loads(line) for line in (SAMPLE / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["group_id"] for r in records] == [t["id"] for t in tasks for _ in t["runs"]]
    assert [r["trajectory_id"] for r in records] == [run["id"] for t in tasks for run in t["runs"]]
    # sample/README.md and docs/rollout-format.md give these numbers
    assert (len(tasks), len(records)) == (9, 45)


def test_check_fails_once_a_task_file_changes(tmp_path):
    copy = tmp_path / "sample"
    shutil.copytree(SAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    task = copy / "tasks" / "005-yen-minor-unit.toml"
    text = task.read_text(encoding="utf-8")
    assert text.count('variant = "clean"') == 1
    task.write_text(text.replace('variant = "clean"', 'variant = "alternative"'), encoding="utf-8")
    proc = run_check(copy)
    assert proc.returncode == 1
    assert "rollouts.jsonl is not what build_sample.py builds" in proc.stderr
