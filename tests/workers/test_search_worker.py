"""The search index through a real worker and broker: an import's message once it commits,
none for a failed import, and a broker that was down at import made up for by the sweep."""

import json
import logging

import pytest
import redis

from grading.rollouts import RolloutFormatError
from tests.factories import group, rollout, write_jsonl
from tests.webapp.reviewdata import MESSAGES, import_batch, records
from tests.workers.conftest import wait_until
from webapp.batches.services import batch_import
from webapp.derived import SEARCH_INDEX, sweep_derived
from webapp.jobs import DERIVED, SEARCH_INDEX_TASK
from webapp.models import SearchState
from webapp.search import selectors

pytestmark = pytest.mark.django_db(transaction=True)


def index_messages(server) -> list[dict]:
    """The search-index messages waiting on the derived data's queue of `server`, as kwargs."""
    found = []
    for raw in redis.Redis(port=server.port).lrange(DERIVED, 0, -1):
        message = json.loads(raw)
        if message["headers"]["task"] == SEARCH_INDEX_TASK:
            found.append(message["headers"]["kwargsrepr"])
    return found


def test_a_worker_indexes_an_imported_batch_and_the_search_finds_it(tmp_path, filesystem_broker, workers):
    workers(filesystem_broker)
    recs = records()
    recs[5]["messages"] = [*MESSAGES, {"role": "assistant", "content": "I ran the zebrafish_loader tool."}]
    batch = import_batch(tmp_path, recs)  # the task goes out on commit
    wait_until(lambda: selectors.index_progress(batch).complete, timeout=30,
               message=selectors.index_progress(batch).counts)
    (hit,) = selectors.search(batch, "zebrafish_loader").hits
    assert (hit.kind, hit.trajectory_id, hit.turn) == ("turn", "t6", len(MESSAGES))
    assert {h.kind for h in selectors.search(batch, "adds one").hits} == {"statement", "turn"}


def test_an_import_sends_one_message_once_it_commits_and_a_failed_one_sends_none(tmp_path, redis_server,
                                                                                  own_broker):
    batch = import_batch(tmp_path, group("g1", [1.0, 0.0]))
    assert index_messages(redis_server) == [f"{{'batch_id': {batch.pk}}}"]
    assert SearchState.objects.get(batch=batch).sent_at is not None

    bad = write_jsonl(tmp_path / "bad.jsonl", [*group("g2", [1.0]), rollout("g3", "t1", reward="high")])
    with pytest.raises(RolloutFormatError):
        batch_import(paths=[bad], batch_name=batch.name, append=True)
    assert len(index_messages(redis_server)) == 1


def test_a_broker_down_at_import_is_logged_and_the_sweep_sends_once_it_is_back(tmp_path, redis_server, own_broker,
                                                                                caplog):
    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger="webapp.search.services"):
        batch = import_batch(tmp_path, group("g1", [1.0, 0.0]))
    assert "not indexed for search yet" in caplog.text and "the broker is unreachable" in caplog.text
    assert SearchState.objects.get(batch=batch).sent_at is None
    assert sweep_derived(SEARCH_INDEX) == 0  # still down: nothing sent, the next sweep tries again

    redis_server.start()
    assert sweep_derived(SEARCH_INDEX) == 1
    assert index_messages(redis_server) == [f"{{'batch_id': {batch.pk}}}"]
    assert sweep_derived(SEARCH_INDEX) == 0  # sent a moment ago
