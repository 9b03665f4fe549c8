"""The search index follows imports: a worker fills it after each import commits
(`batch_index`, the task's own function, called here directly), chunk by chunk, never
twice; the sweep sends it again for a batch left incomplete. A failed import leaves
nothing; a deleted batch's entries go with it.

Through a real worker and broker: tests/workers/test_search_worker.py."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from grading.rollouts import RolloutFormatError
from tests.factories import group, rollout, write_jsonl
from tests.webapp.reviewdata import MESSAGES, import_batch, records
from webapp.batches.services import batch_import
from webapp.derived import SEARCH_INDEX, sweep_derived
from webapp.models import Batch, SearchState, Trajectory
from webapp.search import services
from webapp.search.services import TABLE, batch_index, turn_text

BEFORE_THE_INDEX = [("webapp", "0009_group_triage")]


def entries(batch=None) -> list[tuple]:
    """(kind, group pk, trajectory pk, turn, role) of the index's entries, in order."""
    key = "id" if connection.vendor == "postgresql" else "rowid"
    where, params = ("WHERE batch_id = %s", [batch.pk]) if batch else ("", [])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT kind, group_pk, trajectory_pk, turn, role FROM {TABLE} {where} ORDER BY {key}", params)
        return cursor.fetchall()


def state(batch) -> tuple[int, int]:
    s = SearchState.objects.get(batch=batch)
    return s.n_indexed, s.indexed_through


@pytest.mark.django_db
def test_the_worker_indexes_the_statement_each_patch_and_each_turn_once(tmp_path):
    batch = import_batch(tmp_path, records())
    assert entries(batch) == [] and state(batch) == (0, 0)  # the import writes none
    assert batch_index(batch.pk) == 6
    found = entries(batch)
    kinds = [kind for kind, *_ in found]
    assert kinds[0] == "statement" and kinds.count("statement") == 1
    assert kinds.count("patch") == 6
    assert kinds.count("turn") == 6 * len(MESSAGES)
    turns = [(turn, role) for kind, _, _, turn, role in found if kind == "turn"][:len(MESSAGES)]
    assert turns == [(i, m["role"]) for i, m in enumerate(MESSAGES)]
    assert state(batch) == (6, Trajectory.objects.filter(batch=batch).order_by("pk").last().pk)
    assert batch_index(batch.pk) == 0 and entries(batch) == found  # a second message adds nothing


def test_a_turn_is_found_by_its_content_its_tool_calls_and_their_arguments():
    role, text = turn_text(MESSAGES[2])
    assert role == "assistant"
    assert text.split("\n")[0] == "Let me look."
    assert "bash\n{" in text and '"command": "cat pkg/mod.py"' in text


@pytest.mark.django_db
def test_a_late_task_is_indexed_once(tmp_path):
    recs = group("g1", [1.0, 0.0, 1.0])
    task = recs[0].pop("task")
    recs[1]["task"] = recs[2]["task"] = task  # not on the group's first line, then twice
    batch = import_batch(tmp_path, recs)
    batch_index(batch.pk)
    assert [kind for kind, *_ in entries(batch)].count("statement") == 1


@pytest.mark.django_db
def test_a_statement_is_indexed_once_when_its_group_spans_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(services, "CHUNK_TRAJECTORIES", 2)
    batch = import_batch(tmp_path, group("g1", [1.0, 0.0, 1.0]) + group("g2", [1.0, 0.0, 1.0]))
    assert batch_index(batch.pk) == 6
    assert [kind for kind, *_ in entries(batch)] == ["statement", "patch", "patch", "patch",
                                                     "statement", "patch", "patch", "patch"]


@pytest.mark.django_db
def test_a_worker_killed_mid_way_leaves_whole_chunks_and_the_next_one_goes_on_from_there(tmp_path, monkeypatch):
    batch = import_batch(tmp_path, [r for i in range(5) for r in group(f"g{i}", [1.0])])
    monkeypatch.setattr(services, "CHUNK_TRAJECTORIES", 2)
    written = services.insert_entries

    def dies_on_the_second_chunk(found):
        if state(batch)[0] == 2:
            raise SystemExit("worker killed")
        written(found)

    monkeypatch.setattr(services, "insert_entries", dies_on_the_second_chunk)
    with pytest.raises(SystemExit):
        batch_index(batch.pk)
    assert state(batch)[0] == 2 and [kind for kind, *_ in entries(batch)] == ["statement", "patch"] * 2
    monkeypatch.setattr(services, "insert_entries", written)
    assert batch_index(batch.pk) == 3
    assert [kind for kind, *_ in entries(batch)] == ["statement", "patch"] * 5


@pytest.mark.django_db
def test_a_failed_import_leaves_no_entry_and_no_state(tmp_path):
    good = group("g1", [1.0, 0.0])
    bad = rollout("g2", "t1", reward="high")
    path = write_jsonl(tmp_path / "bad.jsonl", [*good, *[rollout("g3", f"t{i}", 1.0) for i in range(3000)], bad])
    with pytest.raises(RolloutFormatError):
        batch_import(paths=[path], batch_name="broken")
    assert not Batch.objects.filter(name="broken").exists()
    assert entries() == [] and not SearchState.objects.exists()


@pytest.mark.django_db
def test_an_append_indexes_only_what_it_adds(tmp_path):
    batch = import_batch(tmp_path, group("g1", [1.0, 0.0]))
    batch_index(batch.pk)
    before = entries(batch)
    batch_import(paths=[write_jsonl(tmp_path / "more.jsonl", group("g2", [1.0]) + group("g1", [1.0, 0.0]))],
                 batch_name=batch.name, append=True)
    assert state(batch)[0] == 2  # the append's trajectory is not indexed yet
    assert batch_index(batch.pk) == 1
    after = entries(batch)
    assert after[:len(before)] == before
    assert [kind for kind, *_ in after[len(before):]] == ["statement", "patch"]
    assert state(batch)[0] == 3


@pytest.mark.django_db
def test_deleting_a_batch_deletes_its_entries_and_its_state(tmp_path):
    kept = import_batch(tmp_path, group("g1", [1.0, 0.0]), name="kept")
    gone = import_batch(tmp_path, group("g1", [1.0, 0.0]), name="gone")
    batch_index(kept.pk)
    batch_index(gone.pk)
    kept_entries = entries(kept)
    assert entries(gone)
    gone_pk = gone.pk
    gone.delete()
    assert entries() == kept_entries
    assert batch_index(gone_pk) == 0  # a message that outlived its batch
    assert list(SearchState.objects.values_list("batch_id", flat=True)) == [kept.pk]


@pytest.mark.django_db
def test_the_sweep_sends_again_for_an_incomplete_batch_nothing_touched_for_a_while(tmp_path):
    """The default broker of the tests (the filesystem transport) takes the messages."""
    complete = import_batch(tmp_path, group("g1", [1.0, 0.0]), name="complete")
    batch_index(complete.pk)
    stalled = import_batch(tmp_path, group("g1", [1.0, 0.0]), name="stalled")
    # On import no message was sent in this test (its transaction never commits): as if the broker were down.
    assert sweep_derived(SEARCH_INDEX) == 1
    sent_at = SearchState.objects.get(batch=stalled).sent_at
    assert sent_at is not None
    assert sweep_derived(SEARCH_INDEX) == 0  # sent a moment ago: a worker may be taking it right now
    long_ago = timezone.now() - SEARCH_INDEX.lost_after - timedelta(seconds=1)
    SearchState.objects.update(sent_at=long_ago)
    assert sweep_derived(SEARCH_INDEX) == 1  # the broker lost it, or the worker died before a chunk
    SearchState.objects.filter(batch=stalled).update(sent_at=long_ago, indexed_at=timezone.now())
    assert sweep_derived(SEARCH_INDEX) == 0  # a worker is on it: it committed a chunk a moment ago
    SearchState.objects.filter(batch=stalled).update(indexed_at=long_ago)
    assert sweep_derived(SEARCH_INDEX) == 1  # it stopped
    batch_index(stalled.pk)
    SearchState.objects.update(sent_at=long_ago, indexed_at=long_ago)
    assert sweep_derived(SEARCH_INDEX) == 0  # both complete


@pytest.mark.django_db(transaction=True)
def test_creating_the_index_leaves_what_is_already_there_to_the_sweep_and_the_worker(tmp_path):
    batch = import_batch(tmp_path, records())
    batch_index(batch.pk)
    imported = entries(batch)
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE_THE_INDEX)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert entries(batch) == [] and state(batch) == (0, 0)
    assert SearchState.objects.get(batch=batch).sent_at is None  # so the sweep sends it
    assert sweep_derived(SEARCH_INDEX) == 1
    batch_index(batch.pk)
    assert entries(batch) == imported
