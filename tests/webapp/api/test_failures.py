"""What the app did not expect still answers in the documented shape, `{"errors": [...]}`,
never an HTML page, and is logged with its traceback: a database connection dropped under
the app or a locked database (503, retry), a disk with no room (507), anything else (500).
Each failure is real: a backend terminated, a lock held by another connection, the kernel's
file size limit, SQLite's page limit, /dev/full; nothing of the app is patched."""

import errno
import json
import os
import resource
import signal
import sqlite3
import time

import pytest
from django.db import close_old_connections, connection

from tests.factories import group

pytestmark = pytest.mark.django_db(transaction=True)

UNAVAILABLE = "the database is unavailable ({}): retry in a few seconds"


@pytest.fixture
def headers(researcher, token_of):
    return {"Authorization": f"Bearer {token_of(researcher)}"}


def logged(caplog, status):
    """The app's log records of calls answered `status`; each carries its traceback."""
    records = [r for r in caplog.records if r.name == "webapp.api.endpoints" and f"answered {status}" in r.message]
    assert records and all(r.exc_info for r in records), caplog.text
    return records


def assert_json_error(response, status, message):
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"errors": [message]}


def jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_a_dropped_database_connection_is_a_503_and_the_next_call_works(client, headers, caplog):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no server to drop a connection: its unavailable database is a locked one (below)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            for _ in range(100):  # the backend leaves a moment after the signal
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
                if not cursor.fetchone()[0]:
                    break
                time.sleep(0.05)
    finally:
        other.close()

    try:
        response = client.get("/api/batches", headers=headers)
    finally:
        close_old_connections()  # as the server does after each request (the test client does not)
    assert response.status_code == 503
    assert response.json()["errors"][0] in (UNAVAILABLE.format("OperationalError"),
                                            UNAVAILABLE.format("InterfaceError"))
    assert response["Retry-After"] == "5"
    logged(caplog, 503)
    assert client.get("/api/batches", headers=headers).status_code == 200


def test_a_locked_database_is_a_503(client, headers, caplog):
    # The call's first write (the token's last use) waits for a lock another connection holds.
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout = 200")
        other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
    else:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        other = connection.copy()
        other.set_autocommit(False)
        other.cursor().execute("LOCK TABLE webapp_apitoken IN ACCESS EXCLUSIVE MODE")
    try:
        response = client.get("/api/batches", headers=headers)
    finally:
        other.rollback()
        other.close()
        connection.close()  # its lock wait back to the settings'
    assert_json_error(response, 503, UNAVAILABLE.format("OperationalError"))
    logged(caplog, 503)
    assert client.get("/api/batches", headers=headers).status_code == 200


@pytest.fixture
def spool(settings, tmp_path):
    """The upload spool in a folder of this test's own."""
    settings.DATA_DIR = tmp_path
    return tmp_path / "api"


def test_an_upload_the_disk_has_no_room_for_is_a_507_and_leaves_nothing(client, headers, spool, caplog):
    # The kernel refuses writes past the process's file size limit (EFBIG, as a full disk
    # refuses them with ENOSPC); Python ignores SIGXFSZ, so the write raises. The limit is
    # above every file the database may write to in the meantime.
    database_files = [connection.settings_dict["NAME"] + suffix for suffix in ("", "-wal")
                      if connection.vendor == "sqlite"]
    limit = max([os.path.getsize(f) for f in database_files if os.path.exists(f)] + [0]) + 8 * 1024**2
    record = group("g1", [1])[0]
    body = jsonl([{**record, "patch": "x" * (limit + 1024**2)}])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        response = client.post("/api/steps?run=r&step=1", body, content_type="application/x-ndjson",
                               headers=headers)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert_json_error(response, 507, "the server has no room to write this call's data (File too large): retry "
                                     "once its administrator has made room")
    logged(caplog, 507)
    assert not list(spool.iterdir())  # the part received is gone
    from webapp.models import Batch

    assert not Batch.objects.exists()


def test_a_database_with_no_room_is_a_507(client, headers):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's disk cannot be filled from a test; SQLite's page limit refuses as a full disk does")
    client.get("/api/batches", headers=headers)  # the token's last use written before the database is capped
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_size")
        page_size = cursor.fetchone()[0]
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_count")
        cursor.execute(f"PRAGMA max_page_count = {cursor.fetchone()[0]}")
    records = [{**r, "patch": "x" * 4000} for r in group("g1", [1, 0] * ((free + 64) * page_size // 8000 + 1))]
    try:
        response = client.post("/api/steps?run=r&step=1", jsonl(records), content_type="application/x-ndjson",
                               headers=headers)
    finally:
        connection.close()  # the page limit is the connection's
    assert_json_error(response, 507, "the database has no room to write (its disk is full): retry once its "
                                     "administrator has made room")
    assert client.get("/api/batches?name=r/step-1", headers=headers).json() == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_is_a_507(rf):
    """ENOSPC itself, from /dev/full, through the handler every operation's errors go to."""
    from webapp.api.endpoints import api

    with pytest.raises(OSError) as full, open("/dev/full", "wb", buffering=0) as device:
        device.write(b"rollouts")
    assert full.value.errno == errno.ENOSPC
    response = api.on_exception(rf.post("/api/steps"), full.value)
    assert response.status_code == 507
    assert json.loads(response.content) == {"errors": [
        "the server has no room to write this call's data (No space left on device): retry once its administrator "
        "has made room"]}


def test_any_other_failure_is_a_500_in_the_json_shape(client, headers, spool, caplog):
    spool.write_text("a file where the upload spool's folder should be")
    response = client.post("/api/steps?run=r&step=1", jsonl(group("g1", [1, 0])), content_type="application/x-ndjson",
                           headers=headers)
    assert_json_error(response, 500, "the app failed on this call (FileExistsError); the server's log has the "
                                     "details: tell its administrator")
    logged(caplog, 500)


def test_a_path_under_the_api_that_names_no_endpoint_is_a_404_in_the_json_shape(client, headers):
    response = client.get("/api/no/such/thing", headers=headers)
    assert response.status_code == 404
    assert response.json() == {"errors": ["no API endpoint at /api/no/such/thing: see /api/docs"]}
