"""Exports write under DATA_DIR/exports: each test gets a data folder of its own (a worker
started by the test is handed it too). The real-worker fixtures come from tests/workers."""

import pytest

from tests.workers.conftest import filesystem_broker, own_broker, redis_broker, redis_server, workers  # noqa: F401


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


@pytest.fixture
def ranked_batch(tmp_path, researcher):
    from tests.webapp.exports.data import ranked_batch

    return ranked_batch(tmp_path, researcher)
