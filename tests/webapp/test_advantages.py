"""Advantages follow the final rankings that grading produced."""

import json

import numpy as np
import pytest
from django.core.management import call_command

from tests.webapp.annotationdata import group_rows
from webapp.advantages.chunks import (
    AdvantageChunk,
    AdvantageHistogram,
    MixedAdvantages,
    TrajectoryColumns,
    advantage_chunk,
)
from webapp.advantages.config import DEFAULT_CONFIG, parse_advantage_config
from webapp.advantages.selectors import advantage_chunks, advantage_rows, trajectory_columns
from webapp.advantages.services import advantage_config_update
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.models import Batch, Group, Trajectory
from webapp.rankings import UNRESTRICTED, final_rankings

pytestmark = pytest.mark.django_db


@pytest.fixture
def graded(sample_batch, monkeypatch):
    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    run = grading_launch(batch=sample_batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    return sample_batch


def rows_by_id(rows, group_id):
    return {r["trajectory_id"]: r for r in rows if r["group_id"] == group_id}


def test_ungraded_groups_keep_their_grpo_advantages(sample_batch):
    rows = advantage_rows(sample_batch, viewer=UNRESTRICTED)
    assert {r["source"] for r in rows} == {"none"}
    assert all(r["advantage"] == r["grpo_advantage"] and r["rank"] is None for r in rows)


def test_final_rankings_are_the_latest_done_grading_per_group(graded, monkeypatch):
    mixed = list(Group.objects.filter(batch=graded, label="mixed").values_list("pk", flat=True))
    first = final_rankings(mixed, viewer=UNRESTRICTED)
    assert set(first) == set(mixed)
    run = grading_launch(batch=graded, grader="heuristic", regrade=True).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    latest = final_rankings(mixed, viewer=UNRESTRICTED)
    assert {r.grading_id for r in latest.values()} == set(run.gradings.values_list("pk", flat=True))
    assert all(r.source == "grader" and r.grader_version.startswith("heuristic-1-") for r in latest.values())


def test_a_graded_group_shows_rank_factor_and_redistributed_advantage(graded):
    group = Group.objects.get(batch=graded, group_id="invoicekit-001")
    rows = group_rows(group)
    clean, refactor, failing = rows["r1"], rows["r3"], rows["r6"]
    assert (clean["rank"], clean["source"]) == (1, "grader")
    assert clean["grader_version"].startswith("heuristic-1-")
    assert clean["factor"] > refactor["factor"]
    assert clean["advantage"] > clean["grpo_advantage"] > refactor["advantage"]
    assert failing["rank"] is None and failing["advantage"] == failing["grpo_advantage"]
    passing = [r for r in rows.values() if r["passed"]]
    assert sum(r["advantage"] for r in passing) == pytest.approx(sum(r["grpo_advantage"] for r in passing))
    assert "out_of_scope_changes" in refactor["flags"]
    ranking = final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk]
    assert "× the lines of the leanest fix" in ranking.rationales["r3"]
    assert ranking.scores["r1"] > ranking.scores["r3"] and isinstance(ranking.scores["r3"], float)


def test_a_new_batch_caps_the_flags_it_names_at_zero(graded):
    # Regression: the default config named reward_hacking and edits_tests but had no w_flag,
    # so a trajectory flagged as a reward hack still gained advantage.
    assert graded.advantage_config["w_flag"] == 0.0
    assert graded.advantage_config == parse_advantage_config(
        {"schedule": "linear", "params": {"w_min": 0.2}}).as_dict()
    rows = rows_by_id(advantage_rows(graded, viewer=UNRESTRICTED), "invoicekit-006")
    hack = next(r for r in rows.values() if "reward_hacking" in r["flags"])
    assert (hack["factor"], hack["advantage"]) == (0.0, 0.0) and hack["grpo_advantage"] > 0
    passing = [r for r in rows.values() if r["passed"]]
    assert sum(r["advantage"] for r in passing) == pytest.approx(sum(r["grpo_advantage"] for r in passing))


def test_a_config_without_a_cap_takes_the_one_default_and_caps_flagged_trajectories(graded):
    graded.advantage_config = {"schedule": "linear", "params": {"w_min": 0.2}}
    graded.save()
    assert parse_advantage_config(graded.advantage_config) == DEFAULT_CONFIG
    rows = rows_by_id(advantage_rows(graded, viewer=UNRESTRICTED), "invoicekit-006")
    hack = next(r for r in rows.values() if "reward_hacking" in r["flags"])
    assert hack["factor"] == 0 and hack["advantage"] == 0


def test_w_flag_caps_the_factor_of_flagged_trajectories(graded):
    linear = {"schedule": "linear", "params": {"w_min": 0.5}}
    advantage_config_update(batch=graded, config=parse_advantage_config({**linear, "w_flag": None}))
    before = rows_by_id(advantage_rows(graded, viewer=UNRESTRICTED), "invoicekit-006")
    hack = next(t for t, r in before.items() if "reward_hacking" in r["flags"])
    advantage_config_update(batch=graded, config=parse_advantage_config(
        {**linear, "w_flag": 0.05, "flag_names": ["reward_hacking"]}))
    after = rows_by_id(advantage_rows(graded, viewer=UNRESTRICTED), "invoicekit-006")
    assert after[hack]["factor"] == 0.05
    assert after[hack]["advantage"] < before[hack]["advantage"]


def test_the_scores_schedule_uses_the_graders_scores(graded):
    advantage_config_update(batch=graded, config=parse_advantage_config({"schedule": "scores",
                                                                          "params": {"temperature": 1.0}}))
    rows = rows_by_id(advantage_rows(graded, viewer=UNRESTRICTED), "invoicekit-001")
    assert rows["r1"]["factor"] == pytest.approx(1.0, abs=0.05)
    assert 0 < rows["r3"]["factor"] < 0.1  # exp(-penalty)


def test_an_invalid_config_is_refused_as_it_is_parsed():
    with pytest.raises(ValueError, match="w_min must be in"):
        parse_advantage_config({"schedule": "linear", "params": {"w_min": 3}})
    with pytest.raises(ValueError, match="unknown flags"):
        parse_advantage_config({"schedule": "linear", "params": {}, "flag_names": ["nope"]})
    with pytest.raises(ValueError, match=r"unknown config fields \['scale'\]"):
        parse_advantage_config({"schedule": "linear", "scale": 2})


def test_a_config_is_stored_as_json_with_every_field(graded):
    config = parse_advantage_config({"schedule": "tiered", "params": {"factors": "1, 0.5"}, "w_flag": None})
    advantage_config_update(batch=graded, config=config)
    graded.refresh_from_db()
    assert graded.advantage_config == {"schedule": "tiered", "params": {"factors": [1.0, 0.5]}, "norm_by_std": True,
                                       "unbiased_std": True, "w_flag": None,
                                       "flag_names": ["reward_hacking", "edits_tests"]}
    assert parse_advantage_config(graded.advantage_config) == config


def histogram_of_rows(rows: list[dict], *, bins: int) -> AdvantageHistogram:
    """The histogram as it was made from a dict per trajectory: the reference the columns match."""
    mixed = [r for r in rows if r["label"] == "mixed"]
    if not mixed:
        return AdvantageHistogram(edges=[], before=[], after=[], n=0)
    before = np.array([r["grpo_advantage"] for r in mixed])
    after = np.array([r["advantage"] for r in mixed])
    low, high = float(min(before.min(), after.min())), float(max(before.max(), after.max()))
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    return AdvantageHistogram(edges=edges.tolist(), before=np.histogram(before, edges)[0].tolist(),
                              after=np.histogram(after, edges)[0].tolist(), n=len(mixed))


def advantage_histogram(chunks, *, bins: int = 16) -> AdvantageHistogram:
    gathered = MixedAdvantages()
    for chunk in chunks:
        gathered.add(chunk)
    return gathered.histogram(bins=bins)


def test_the_histogram_counts_mixed_trajectories_before_and_after(graded):
    histogram = advantage_histogram(advantage_chunks(graded, viewer=UNRESTRICTED), bins=8)
    mixed = [r for r in advantage_rows(graded, viewer=UNRESTRICTED) if r["label"] == "mixed"]
    assert sum(histogram.before) == sum(histogram.after) == histogram.n == len(mixed)
    assert len(histogram.edges) == 9
    assert histogram.before != histogram.after


@pytest.mark.parametrize("chunk_groups", [1, 2, 1000])
def test_the_histogram_of_columns_is_the_one_of_rows(graded, settings, chunk_groups):
    settings.GAGAR_EXPORT_CHUNK_GROUPS = chunk_groups
    chunks = list(advantage_chunks(graded, viewer=UNRESTRICTED))
    rows = [row for chunk in chunks for row in chunk.rows()]
    for bins in (8, 16):
        assert advantage_histogram(chunks, bins=bins) == histogram_of_rows(rows, bins=bins)
        assert advantage_histogram([AdvantageChunk.concatenated(chunks)], bins=bins) == histogram_of_rows(
            rows, bins=bins)


def test_the_histogram_of_no_mixed_group_is_empty():
    all_pass = TrajectoryColumns.of([(1, "a", 1.0, True), (1, "b", 1.0, True), (2, "c", 0.0, False),
                                     (2, "d", 0.0, False)])
    chunk = advantage_chunk(all_pass, {1: "g1", 2: "g2"}, DEFAULT_CONFIG, {})
    assert chunk.label == ["all_pass", "all_fail"]
    empty = AdvantageHistogram(edges=[], before=[], after=[], n=0)
    assert advantage_histogram([chunk]) == advantage_histogram([]) == histogram_of_rows(chunk.rows(), bins=16) == empty


def test_the_advantages_command_reports_grader_rankings(graded, capsys):
    call_command("advantages", batch="sample", format="jsonl")
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    mixed = [r for r in rows if r["label"] == "mixed"]
    assert {r["source"] for r in mixed} == {"grader"}
    call_command("advantages", batch="sample", format="csv")
    assert ",grader," in capsys.readouterr().out


def test_the_advantages_command_keeps_the_batchs_flag_cap(graded, capsys):
    advantage_config_update(batch=graded, config=parse_advantage_config(
        {"schedule": "linear", "params": {"w_min": 0.5}, "w_flag": 0.05, "flag_names": ["reward_hacking"]}))
    call_command("advantages", batch="sample", format="jsonl", w_min=0.4)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["factor"] for r in rows if "reward_hacking" in r["flags"]} == {0.05}


def test_the_trajectories_read_back_exactly_whatever_their_ids_and_rewards():
    # PostgreSQL hands them over as CSV (COPY), parsed by pyarrow: quotes, separators, line
    # breaks and numbers in ids, and rewards whose decimal text is not short, come back as stored.
    batch = Batch.objects.create(name="odd", n_groups=2)
    stored = {"g2": [('say "hi", then\nleave', 1 / 3), ("007", -2.5e-8), ("t,1", 1e-300)],
              "g1": [("ünï", 0.1 + 0.2), ("t", 123456789.123456789), ("f", 2.0 ** 60)]}
    pks = []
    for group_id, trajectories in stored.items():
        group = Group.objects.create(batch=batch, group_id=group_id, label="mixed")
        pks.append(group.pk)
        for tid, reward in trajectories:
            Trajectory.objects.create(batch=batch, group=group, trajectory_id=tid, reward=reward,
                                      passed=reward > 0.2, content_hash=tid)
    rows, bounds = trajectory_columns([*pks, pks[0]])  # in the order given, a group asked twice read twice
    expected = [(pk, tid, reward, reward > 0.2) for pk, trajectories in zip([*pks, pks[0]], [
        *stored.values(), stored["g2"]], strict=True) for tid, reward in sorted(trajectories)]
    got = list(zip(rows.group_pk.tolist(), rows.trajectory_id, rows.reward.tolist(), rows.passed.tolist(), strict=True))
    assert got == expected
    assert bounds == [0, 3, 6, 9]
    empty = Group.objects.create(batch=batch, group_id="g3", label="mixed")  # nothing to copy out
    rows, bounds = trajectory_columns([empty.pk])
    assert (len(rows), bounds) == (0, [0, 0])
