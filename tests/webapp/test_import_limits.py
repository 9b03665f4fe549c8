"""The import's limits and refusals through the command line, the batches page and the API:
decompression bombs, files too large or not files, fields too long for their columns, a
key given twice, group size, and database errors on the command line."""

import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
import zstandard
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DataError, OperationalError

from tests.factories import group, rollout, write_jsonl
from tests.grading.formats.agentruns import openhands_row, swe_agent_traj
from tests.grading.formats.formatfiles import write_json, zip_folders
from webapp.api.services import api_token_create
from webapp.models import Batch, Group, Trajectory

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]


def import_rollouts(*paths, batch="b1", **options):
    call_command("import_rollouts", *map(str, paths), batch=batch, **options)


@pytest.fixture
def api_headers(researcher):
    return {"Authorization": f"Bearer {api_token_create(user=researcher, name='t')[1]}"}


def newline_bomb() -> bytes:
    """The probe's upload: 1 GiB of newlines in about 32 KB of zstd."""
    out = io.BytesIO()
    writer = zstandard.ZstdCompressor(level=3).stream_writer(out, closefd=False)
    block = b"\n" * 1024**2
    for _ in range(1024):
        writer.write(block)
    writer.close()
    return out.getvalue()


LINES_ERROR = ("file: the import is over 10000000 lines (blank lines count), the most one import may read; "
               "stopped reading")


def test_a_zstd_bomb_posted_to_the_api_is_refused(client, api_headers):
    body = newline_bomb()
    assert len(body) < 64 * 1024
    response = client.post("/api/batches?name=bomb&filename=r.jsonl", body, content_type="application/x-ndjson",
                           headers={**api_headers, "Content-Encoding": "zstd"})
    assert response.status_code == 400
    assert response.json() == {"errors": [f"r.jsonl.zst:10000001: {LINES_ERROR}"]}
    assert not Batch.objects.exists()


def test_a_zstd_bomb_posted_to_the_batches_page_is_refused(client, researcher):
    client.force_login(researcher)
    response = client.post("/batches/import/", {
        "name": "bomb", "file_format": "jsonl", "paths": SimpleUploadedFile("bomb.jsonl.zst", newline_bomb())})
    assert response.status_code == 400
    assert f"bomb.jsonl.zst:10000001: {LINES_ERROR}" in response.content.decode()
    assert not Batch.objects.exists()


def test_a_zstd_bomb_on_the_command_line_is_refused(tmp_path):
    bomb = tmp_path / "bomb.jsonl.zst"
    bomb.write_bytes(newline_bomb())
    with pytest.raises(CommandError) as raised:
        import_rollouts(bomb)
    assert str(raised.value) == f"nothing imported:\n{bomb}:10000001: {LINES_ERROR}"


def test_a_file_of_bad_lines_stops_at_the_hundredth_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(
        json.dumps(rollout("g", f"t{i}", "x")) + "\n" for i in range(200_000)))
    with pytest.raises(CommandError) as raised:
        import_rollouts(path)
    message = str(raised.value).splitlines()
    assert len(message) == 52  # "nothing imported:", 50 errors, the count
    assert message[-1] == "... and 50 more errors not shown; stopped after 100 errors, the rest was not read"


def test_a_traj_over_the_size_of_a_line_in_a_small_archive_is_refused(client, api_headers, tmp_path):
    # The probe: a 302 KB zip imported a 310 MB patch.
    traj = swe_agent_traj(tmp_path / "runs" / "run-a" / "i1" / "i1.traj")
    data = json.loads(traj.read_text())
    data["info"]["submission"] = "+x\n" * (12 * 1024**2)
    traj.write_text(json.dumps(data))
    size = traj.stat().st_size
    archive = zip_folders(tmp_path / "runs.zip", tmp_path / "runs")
    assert archive.stat().st_size < 400 * 1024
    report = write_json(tmp_path / "a.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    files = {"paths": SimpleUploadedFile("runs.zip", archive.read_bytes()),
             "reports": SimpleUploadedFile("a.json", report.read_bytes())}
    response = client.post("/api/batches/import?name=up&format=swe-agent", files, headers=api_headers)
    assert response.status_code == 400
    assert response.json() == {"errors": [
        f"runs.zip: run-a/i1/i1.traj: file: is {size} bytes, over the limit of 32 MiB for one JSON file "
        "(a file of many items can be JSON Lines, where the limit is per line)"]}


def openhands_archive(tmp_path, args) -> dict:
    row = openhands_row("i1", "run-a")
    row["history"][1]["args"] = args
    run = tmp_path / "runs" / "run-a"
    run.mkdir(parents=True)
    (run / "output.jsonl").write_text(json.dumps(row) + "\n")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(run, arcname="run-a")
    report = json.dumps({"resolved_ids": ["i1"], "unresolved_ids": []}).encode()
    return {"name": "oh", "file_format": "openhands", "paths": SimpleUploadedFile("runs.tar.gz", buffer.getvalue()),
            "reports": SimpleUploadedFile("report.json", report)}


@pytest.mark.parametrize(("args", "imported"), [
    ({"command": "ls", "timeout": 2**64 + 1}, True),  # 65 bits
    ({"command": "\ud800"}, False),  # a lone surrogate
    ({"x": json.loads('{"x": ' * 400 + "{}" + "}" * 400)}, True),  # deeper than orjson writes
])
def test_openhands_arguments_that_once_gave_a_500_import_or_are_refused(client, researcher, tmp_path, args,
                                                                          imported):
    client.force_login(researcher)
    response = client.post("/batches/import/", openhands_archive(tmp_path, args))
    assert response.status_code == (302 if imported else 400)
    if imported:
        call = Trajectory.objects.get().transcript.messages[1]["tool_calls"][0]
        assert json.loads(call["function"]["arguments"]) == args
    else:
        assert "runs.tar.gz: run-a/output.jsonl:1: history[1].args: contains an unpaired surrogate escape" in \
            response.content.decode()


def test_task_fields_longer_than_their_columns_are_refused_on_every_database(tmp_path):
    # The probe: a 500 with a raw DataError on PostgreSQL; SQLite took the same file.
    records = group("g", [1, 0])
    records[0]["task"] |= {"base_commit": "c" * 129, "repo": "r" * 513}
    with pytest.raises(CommandError) as raised:
        import_rollouts(write_jsonl(tmp_path / "r.jsonl", records))
    assert str(raised.value).splitlines()[1:] == [
        f"{tmp_path / 'r.jsonl'}:1: task.repo: is 513 characters long, over the limit of 512",
        f"{tmp_path / 'r.jsonl'}:1: task.base_commit: is 129 characters long, over the limit of 128",
    ]
    records[0]["task"] |= {"base_commit": "c" * 128, "repo": "r" * 512}
    import_rollouts(write_jsonl(tmp_path / "r.jsonl", records))
    assert len(Group.objects.get().base_commit) == 128


def test_a_key_given_twice_is_refused_by_the_api(client, api_headers):
    body = b'{"group_id": "g", "trajectory_id": "t", "reward": 1, "patch": "", "reward": 0}\n'
    response = client.post("/api/batches?name=x&filename=r.jsonl", body, content_type="application/x-ndjson",
                           headers=api_headers)
    assert (response.status_code, response.json()) == (400, {"errors": [
        "r.jsonl:1: line: key 'reward' is given twice in one object"]})


def test_a_fifo_given_to_the_command_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)

    def release():  # a reader that waits on the FIFO (as the import once did) gets an empty file
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    timer = threading.Timer(15, release)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(CommandError) as raised:
            import_rollouts(fifo)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10
    assert str(raised.value) == (f"nothing imported:\n{fifo}: file: is not a regular file (a FIFO, socket or "
                                 "device); only files are read")


def test_a_traj_linked_from_outside_the_run_folder_is_refused_by_the_command(tmp_path):
    swe_agent_traj(tmp_path / "run-a" / "i1" / "i1.traj")
    (tmp_path / "run-a" / "i2.traj").symlink_to(swe_agent_traj(tmp_path / "secret" / "i2.traj"))
    report = write_json(tmp_path / "a.json", {"resolved_ids": ["i1", "i2"], "unresolved_ids": []})
    with pytest.raises(CommandError, match=r"run-a/i2\.traj: file: is a link to a file outside the run folder"):
        import_rollouts(tmp_path / "run-a", file_format="swe-agent", reports=[str(report)])
    assert not Batch.objects.exists()


# Group size


def test_a_group_over_the_maximum_size_is_refused_naming_file_line_and_group(tmp_path, settings):
    settings.GAGAR_MAX_GROUP_SIZE = 3
    path = write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0, 1, 0]))
    with pytest.raises(CommandError, match=r"r\.jsonl:4: group_id: group 'g' has more than 3 trajectories, "
                                           r"the most one group may have"):
        import_rollouts(path)
    assert not Batch.objects.exists()
    import_rollouts(write_jsonl(tmp_path / "ok.jsonl", group("g", [1, 0, 1])))
    assert Trajectory.objects.count() == 3


def test_an_append_that_would_push_a_group_past_the_maximum_is_refused(tmp_path, settings):
    settings.GAGAR_MAX_GROUP_SIZE = 3
    import_rollouts(write_jsonl(tmp_path / "a.jsonl", group("g", [1, 0])))
    more = write_jsonl(tmp_path / "b.jsonl", [rollout("g", "t3", 1.0), rollout("g", "t4", 0.0)])
    with pytest.raises(CommandError, match=r"b\.jsonl:2: group_id: group 'g' has more than 3 trajectories"):
        import_rollouts(more, append=True)
    assert Trajectory.objects.count() == 2


def test_the_maximum_group_size_is_fifty_thousand_unless_set(settings):
    from webapp.batches.services import import_limits

    assert import_limits().group_size == 50_000
    settings.GAGAR_MAX_GROUP_SIZE = 7
    assert import_limits().group_size == 7


# Batch names: one normalisation for import and grade


def test_grade_finds_a_batch_named_with_spaces_around_as_import_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    import_rollouts(write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0])), batch="  run-7 ")
    assert Batch.objects.get().name == "run-7"
    call_command("grade", batch=" run-7  ")
    assert "1 groups queued" in capsys.readouterr().out


# Database errors on the command line: one line and a non-zero exit, no traceback


@pytest.mark.parametrize("error", [
    DataError("value too long for type character varying(128)\n"),
    OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused\n\tIs the server '
                     "running on that host and accepting TCP/IP connections?\n"),
])
def test_a_database_error_during_an_import_is_one_line(tmp_path, monkeypatch, error):
    def fail(**kwargs):
        raise error

    monkeypatch.setattr("webapp.management.commands.import_rollouts.batch_import", fail)
    with pytest.raises(CommandError) as raised:
        import_rollouts(write_jsonl(tmp_path / "r.jsonl", group("g", [1])))
    assert str(raised.value).startswith(f"database error: {str(error).splitlines()[0]}")
    assert len(str(raised.value).splitlines()) == 1


def _manage(*args, data_dir, database_url=None):
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env |= {"SECRET_KEY": "test-only-secret-key", "GAGAR_DATA_DIR": str(data_dir)}
    if database_url:
        env["DATABASE_URL"] = database_url
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("database_url", [None, "postgres://nobody@127.0.0.1:9/none"])
def test_import_and_grade_without_a_usable_database_say_so_in_one_line(tmp_path, database_url):
    path = write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0]))
    for args in (["import_rollouts", str(path), "--batch", "b"], ["grade", "--batch", "b"]):
        done = _manage(*args, data_dir=tmp_path / "data", database_url=database_url)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("CommandError: database error: "), done.stderr


def test_a_body_whose_client_went_away_is_a_400_and_leaves_nothing(settings):
    from django.http import UnreadablePostError
    from ninja.errors import HttpError

    from webapp.api.uploads import received_body

    class Request:
        headers = {"Content-Length": "100"}

        def __init__(self):
            self.calls = 0

        def read(self, size):
            self.calls += 1
            if self.calls == 1:
                return b"x" * 10
            raise UnreadablePostError("connection reset by peer")

    with pytest.raises(HttpError) as raised, received_body(Request(), filename="r.jsonl"):
        pass
    assert (raised.value.status_code, str(raised.value)) == (
        400, "the body ended after 10 of 100 bytes: connection reset by peer")
    assert not any((settings.DATA_DIR / "api").iterdir())
