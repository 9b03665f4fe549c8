import argparse
import csv
import io
import json
from dataclasses import fields
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from webapp.advantages.chunks import ROW_FIELDS
from webapp.advantages.config import AdvantageConfig
from webapp.management.commands.advantages import SWITCHES, add_config_arguments, config_overrides


def advantages(**options) -> str:
    out = io.StringIO()
    call_command("advantages", stdout=out, **options)
    return out.getvalue()


def test_it_prints_one_jsonl_row_per_trajectory_with_every_field(sample_batch):
    rows = [json.loads(line) for line in advantages(batch="sample").splitlines()]
    assert len(rows) == sample_batch.n_trajectories
    assert all(tuple(row) == ROW_FIELDS for row in rows)


def test_without_rankings_advantages_equal_grpo_and_source_is_none(sample_batch):
    rows = [json.loads(line) for line in advantages(batch="sample").splitlines()]
    assert all(row["source"] == "none" and row["rank"] is None for row in rows)
    assert all(row["advantage"] == row["grpo_advantage"] for row in rows)


def test_grpo_advantages_follow_the_group_statistics(sample_batch):
    rows = [json.loads(line) for line in advantages(batch="sample").splitlines()]
    group = [r for r in rows if r["group_id"] == "invoicekit-001"]
    passing = {r["grpo_advantage"] for r in group if r["passed"]}
    failing = {r["grpo_advantage"] for r in group if not r["passed"]}
    assert len(passing) == len(failing) == 1
    assert passing.pop() > 0 > failing.pop()
    assert sum(r["grpo_advantage"] for r in group) == pytest.approx(0, abs=1e-9)
    assert {r["label"] for r in rows if r["group_id"] == "invoicekit-003"} == {"all_pass"}


def test_csv_has_a_header_and_the_same_rows(sample_batch):
    rows = list(csv.DictReader(io.StringIO(advantages(batch="sample", format="csv"))))
    assert len(rows) == sample_batch.n_trajectories
    assert set(rows[0]) == set(ROW_FIELDS)


def test_dr_grpo_does_not_divide_by_std(sample_batch):
    rows = [json.loads(line) for line in advantages(batch="sample", no_std=True).splitlines()]
    group = [r for r in rows if r["group_id"] == "invoicekit-001"]
    assert {round(r["grpo_advantage"], 9) for r in group} == {0.25, -0.75}


def test_an_unknown_batch_is_an_error(db):
    with pytest.raises(CommandError, match="no batch named 'nope'"):
        advantages(batch="nope")


def test_an_unknown_schedule_is_an_error_naming_the_known_ones(sample_batch):
    with pytest.raises(CommandError, match="known schedules: exponential, linear"):
        advantages(batch="sample", schedule="cubic")


def test_a_bad_schedule_parameter_is_an_error(sample_batch):
    with pytest.raises(CommandError, match="w_min"):
        advantages(batch="sample", schedule="linear", w_min=1.5)


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path):
    # Regression: `manage.py advantages ... | head` ended in a BrokenPipeError traceback. A real pipe,
    # in a process of its own on a database of its own, with more rows than a pipe buffers.
    import os
    import subprocess
    import sys

    from tests.factories import group, write_jsonl

    root = Path(__file__).resolve().parents[2]
    env = {"PATH": os.environ["PATH"], "GAGAR_DATA_DIR": str(tmp_path / "data"), "SECRET_KEY": "k"}
    rollouts = write_jsonl(tmp_path / "r.jsonl", [r for g in range(600) for r in group(f"group-{g:04}", [1, 0, 1, 0])])
    for args in (["migrate", "-v", "0"], ["import_rollouts", str(rollouts), "--batch", "big", "-v", "0"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env, check=True)
    reader = subprocess.Popen([sys.executable, "manage.py", "advantages", "--batch", "big"], cwd=root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = json.loads(reader.stdout.readline())
    reader.stdout.close()  # what `head -1` does after its line
    stderr = reader.stderr.read().decode()
    assert reader.wait() == 1 and first["group_id"] == "group-0000"
    assert stderr == ""


def test_it_finds_the_batch_named_with_spaces_around_as_import_and_grade_do(sample_batch):
    assert advantages(batch=" sample ") == advantages(batch="sample")


def test_each_boolean_field_of_the_config_has_a_switch_that_turns_it_off():
    assert set(SWITCHES) == {f.name for f in fields(AdvantageConfig) if f.type is bool}
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    assert config_overrides(vars(parser.parse_args([]))) == {"params": {}}
    options = vars(parser.parse_args(["--no-std", "--population-std", "--schedule", "exponential", "--gamma", "0.5"]))
    assert config_overrides(options) == {"schedule": "exponential", "params": {"gamma": 0.5}, "norm_by_std": False,
                                         "unbiased_std": False}
