"""The advantages export's files: columns and types, order, sources, reproducibility, streaming."""

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.db import connection

from tests.factories import group, write_jsonl
from tests.webapp.annotationdata import grade, review_batch, save
from tests.webapp.exports.data import EXPECTED
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.selectors import advantage_rows, next_groups
from webapp.advantages.services import advantage_config_update
from webapp.exports import advantages as export_advantages
from webapp.exports.advantages import COLUMNS, SCHEMA, advantage_jsonl_lines, write_advantages, writer_version
from webapp.models import Batch, Group
from webapp.rankings import UNRESTRICTED, final_rankings

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]


def export(batch, path, format="parquet", **config) -> Path:
    base = parse_advantage_config(batch.advantage_config)
    write_advantages(batch, path, viewer=UNRESTRICTED, format=format, config=parse_advantage_config(config, base=base))
    return path


def jsonl_rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_group(rows) -> dict[str, list[dict]]:
    out = {}
    for row in rows:
        out.setdefault(row["group_id"], []).append(row)
    return out


def test_the_parquet_file_has_the_documented_columns_and_types(ranked_batch, tmp_path):
    table = pq.read_table(export(ranked_batch, tmp_path / "a.parquet"))
    assert tuple(table.schema.names) == COLUMNS == (
        "batch", "group_id", "trajectory_id", "reward", "corrected_reward", "passed", "label", "grpo_advantage",
        "factor", "rank", "advantage", "reward_for_trainer", "source", "source_reason", "flags", "grader",
        "grader_version", "ranking_version")
    assert table.schema.remove_metadata().equals(SCHEMA)
    types = {f.name: f.type for f in table.schema}
    assert (types["rank"], types["factor"], types["passed"]) == (pa.int32(), pa.float64(), pa.bool_())
    assert types["flags"] == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert table.num_rows == ranked_batch.n_trajectories == 33


def test_each_group_names_where_its_advantages_come_from(ranked_batch, tmp_path):
    groups = by_group(jsonl_rows(export(ranked_batch, tmp_path / "a.jsonl", "jsonl")))
    assert {g: {(r["source"], r["source_reason"]) for r in rows} for g, rows in groups.items()} == {
        g: {expected} for g, expected in EXPECTED.items()}
    gradings = {g.group_id: g.gradings.get().pk for g in Group.objects.filter(batch=ranked_batch)
                if g.gradings.exists()}
    graded = groups["task-1"][0]
    assert (graded["grader"], graded["grader_version"]) == ("heuristic", "test-1")
    assert graded["ranking_version"] == f"grading:{gradings['task-1']}"
    human = groups["task-2"][0]
    assert (human["grader"], human["grader_version"], human["ranking_version"]) == (None, None, "annotation:1")
    assert groups["task-3"][0]["ranking_version"] == f"grading:{gradings['task-3']}"
    assert all(r[k] is None for r in groups["task-5"] for k in ("grader", "grader_version", "ranking_version"))


def test_a_ranking_that_applies_moves_credit_and_one_that_does_not_keeps_grpo(ranked_batch, tmp_path):
    groups = by_group(jsonl_rows(export(ranked_batch, tmp_path / "a.jsonl", "jsonl")))
    human = {r["trajectory_id"]: r for r in groups["task-2"]}
    assert (human["t5"]["rank"], human["t1"]["rank"], human["t6"]["rank"]) == (1, 2, None)
    assert human["t5"]["advantage"] > human["t5"]["grpo_advantage"] > human["t4"]["advantage"]
    assert human["t3"]["flags"] == ["reward_hacking"] and human["t5"]["flags"] == []
    passing = [r for r in human.values() if r["passed"]]
    assert sum(r["advantage"] for r in passing) == pytest.approx(sum(r["grpo_advantage"] for r in passing))
    for group_id in ("task-3", "task-4", "task-5", "solo"):
        assert all(r["advantage"] == r["grpo_advantage"] for r in groups[group_id]), group_id
    assert all(r["rank"] is None and r["factor"] is None for r in groups["task-3"])  # not applied
    assert len({r["factor"] for r in groups["task-4"] if r["passed"]}) == 1  # applied: all tied, one factor


def test_reward_for_trainer_is_the_advantage_and_corrected_reward_is_null(ranked_batch, tmp_path):
    table = pq.read_table(export(ranked_batch, tmp_path / "a.parquet"))
    assert table["reward_for_trainer"].equals(table["advantage"])
    assert table["corrected_reward"].null_count == table.num_rows
    assert set(table["batch"].to_pylist()) == {"ranked"}


def test_corrected_reward_is_the_overrides_and_null_where_none(tmp_path, researcher):
    batch = review_batch(tmp_path, n=2, name="overridden")
    group = Group.objects.get(batch=batch, group_id="task-1")
    save(group, researcher, [["t2"], ["t3"], ["t4"], ["t5"]],
         verdicts={"t1": {"passed": False, "reason": "hard-codes the answer"}})
    parquet = pq.read_table(export(batch, tmp_path / "a.parquet")).to_pylist()
    jsonl = jsonl_rows(export(batch, tmp_path / "a.jsonl", "jsonl"))
    assert parquet == jsonl
    corrected = {(r["group_id"], r["trajectory_id"]): r["corrected_reward"] for r in jsonl
                 if r["corrected_reward"] is not None}
    assert corrected == {("task-1", "t1"): 0.0}
    t1 = next(r for r in jsonl if (r["group_id"], r["trajectory_id"]) == ("task-1", "t1"))
    assert (t1["reward"], t1["passed"], t1["source"]) == (1.0, False, "human") and t1["advantage"] < 0


def test_parquet_and_jsonl_hold_the_same_rows_as_the_advantages_of_the_app(ranked_batch, tmp_path):
    parquet = pq.read_table(export(ranked_batch, tmp_path / "a.parquet")).to_pylist()
    jsonl = jsonl_rows(export(ranked_batch, tmp_path / "a.jsonl", "jsonl"))
    assert parquet == jsonl
    app = advantage_rows(ranked_batch, viewer=UNRESTRICTED)
    assert [{k: row[k] for k in app[0]} for row in jsonl] == app
    # pyarrow's own JSON reader takes the file, with the same column types.
    assert pajson.read_json(tmp_path / "a.jsonl").num_rows == len(app)


def test_rows_come_in_code_point_order_of_group_then_trajectory_id(tmp_path, researcher):
    ids = ["b", "B", "a-2", "a-10", "é", "z_"]
    records = [r for gid in ids for r in group(gid, [1, 0, 1])]
    for r in records:
        r["trajectory_id"] = {"t1": "t10", "t2": "T2", "t3": "t2"}[r["trajectory_id"]]
    call_command("import_rollouts", str(write_jsonl(tmp_path / "o.jsonl", records)), batch="order", verbosity=0)
    table = pq.read_table(export(Batch.objects.get(name="order"), tmp_path / "o.parquet"))
    keys = list(zip(table["group_id"].to_pylist(), table["trajectory_id"].to_pylist(), strict=True))
    assert keys == sorted(keys) and keys[0] == ("B", "T2") and keys[-1][0] == "é"


def test_an_export_is_the_same_bytes_again_and_after_another_batch_changes(ranked_batch, tmp_path, researcher):
    first = export(ranked_batch, tmp_path / "1.parquet").read_bytes()
    first_jsonl = export(ranked_batch, tmp_path / "1.jsonl", "jsonl").read_bytes()
    other = Batch.objects.get(pk=_other_batch(tmp_path, researcher).pk)
    advantage_config_update(batch=other, config=parse_advantage_config({"schedule": "exponential",
                                                                         "params": {"gamma": 0.5}}))
    assert export(ranked_batch, tmp_path / "2.parquet").read_bytes() == first
    assert export(ranked_batch, tmp_path / "2.jsonl", "jsonl").read_bytes() == first_jsonl
    assert export(ranked_batch, tmp_path / "3.parquet", params={"w_min": 0.5}).read_bytes() != first


def _other_batch(tmp_path, user):
    from tests.webapp.reviewdata import import_batch, records

    other_dir = tmp_path / "other"
    other_dir.mkdir()
    batch = import_batch(other_dir, records("task-1"), name="other")
    task = Group.objects.get(batch=batch)
    grade(task)
    save(task, user, [["t2"], ["t1"], ["t3", "t4", "t5"]])
    return batch


def test_the_bytes_do_not_depend_on_how_many_groups_are_read_at_a_time(ranked_batch, tmp_path, settings):
    settings.GAGAR_EXPORT_CHUNK_GROUPS = 1
    one = export(ranked_batch, tmp_path / "1.parquet").read_bytes()
    one_jsonl = export(ranked_batch, tmp_path / "1.jsonl", "jsonl").read_bytes()
    settings.GAGAR_EXPORT_CHUNK_GROUPS = 1000
    assert export(ranked_batch, tmp_path / "2.parquet").read_bytes() == one
    assert export(ranked_batch, tmp_path / "2.jsonl", "jsonl").read_bytes() == one_jsonl


def test_parquet_row_groups_hold_a_fixed_number_of_rows(ranked_batch, tmp_path, settings, monkeypatch):
    monkeypatch.setattr(export_advantages, "ROW_GROUP_ROWS", 4)
    settings.GAGAR_EXPORT_CHUNK_GROUPS = 2  # chunks of 12 or 9 rows: row groups cut across them
    metadata = pq.ParquetFile(export(ranked_batch, tmp_path / "a.parquet")).metadata
    sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    assert sizes == [4] * 8 + [1]


def test_an_empty_batch_still_writes_a_valid_file_with_the_schema(tmp_path):
    empty = Batch.objects.create(name="empty")
    table = pq.read_table(export(empty, tmp_path / "e.parquet"))
    assert table.num_rows == 0 and table.schema.remove_metadata().equals(SCHEMA)
    assert export(empty, tmp_path / "e.jsonl", "jsonl").read_bytes() == b""


def test_the_parquet_writer_that_shapes_the_bytes_is_the_pinned_one(ranked_batch, tmp_path):
    created_by = pq.ParquetFile(export(ranked_batch, tmp_path / "a.parquet")).metadata.created_by
    assert created_by == writer_version() == f"parquet-cpp-arrow version {pa.__version__}"
    assert f"pyarrow=={pa.__version__}" in (ROOT / "requirements" / "app.txt").read_text().splitlines()


def test_the_streamed_jsonl_is_the_file_byte_for_byte(ranked_batch, tmp_path, settings):
    settings.GAGAR_EXPORT_CHUNK_GROUPS = 2
    config = parse_advantage_config(ranked_batch.advantage_config)
    blocks = list(advantage_jsonl_lines(ranked_batch, viewer=UNRESTRICTED, config=config))
    assert len(blocks) == 3 and all(block.endswith(b"\n") for block in blocks)
    assert b"".join(blocks) == export(ranked_batch, tmp_path / "a.jsonl", "jsonl").read_bytes()


def test_an_unknown_format_is_refused_before_anything_is_written(ranked_batch, tmp_path):
    with pytest.raises(ValueError, match="format: must be one of parquet, jsonl, not 'csv'"):
        export(ranked_batch, tmp_path / "a.csv", "csv")
    assert not (tmp_path / "a.csv").exists()


def test_the_export_reads_final_rankings_by_the_pages_rule_without_grader_rationales(ranked_batch):
    pks = list(Group.objects.filter(batch=ranked_batch).values_list("pk", flat=True))
    full, lean = final_rankings(pks, viewer=UNRESTRICTED), final_rankings(pks, lean=True, viewer=UNRESTRICTED)
    assert {f.source for f in full.values()} == {"human", "grader"}
    assert any(f.rationales for f in full.values() if f.source == "grader")
    assert lean == {pk: replace(f, rationales={}, confidence=None) if f.source == "grader" else f
                    for pk, f in full.items()}


def test_an_index_serves_the_keyset_of_groups_in_code_point_order(ranked_batch):
    sql, params = next_groups(ranked_batch, "task-1", 2).query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")  # a test's few rows would not need the index
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "webapp_group_batch_code_point" in plan and "Sort" not in plan
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = "\n".join(row[-1] for row in cursor.fetchall())
            assert "INDEX" in plan and "(batch_id=? AND group_id>?)" in plan and "TEMP B-TREE" not in plan
    assert [group_id for _, group_id in next_groups(ranked_batch, "task-1", 2)] == ["task-2", "task-3"]
