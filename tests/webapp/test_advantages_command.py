import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from webapp.advantages import ROW_FIELDS


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
