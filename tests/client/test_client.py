"""The client on its own, against a small scripted HTTP server: retries, backoff, timeouts,
errors. (Against the real app: tests/webapp/api/test_roundtrip.py.)"""

import gzip
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from gagar_client import Client, GagarAPIError, GagarError
from gagar_client.steps import step_values


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next (status, body, delay) of `script`; records requests."""

    def __init__(self, script):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = list(script)
        self.seen = []

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.answer()

    def answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append((self.command, self.path, dict(self.headers), body))
        status, payload, delay = self.server.script.pop(0)
        time.sleep(delay)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client timed out and left
            pass


@pytest.fixture
def serve():
    servers = []

    def start(*script):
        server = Scripted(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_it_retries_502_503_504_with_backoff_and_then_succeeds(serve):
    server = serve((503, {}, 0), (502, {}, 0), (504, {}, 0), (200, [{"id": 7}], 0))
    with Client(server.url, "tok", retries=3, backoff=0.01) as client:
        assert client.batch_id("b") == 7
    assert [path for _, path, _, _ in server.seen] == ["/api/batches?name=b"] * 4
    assert server.seen[0][2]["Authorization"] == "Bearer tok"


def test_it_gives_up_after_its_retries(serve):
    server = serve(*[(503, {}, 0)] * 3)
    with Client(server.url, "tok", retries=2, backoff=0.01) as client, pytest.raises(GagarAPIError) as error:
        client.batch_id("b")
    assert error.value.status == 503 and len(server.seen) == 3


def test_an_error_answer_is_raised_at_once_with_the_apps_messages(serve):
    server = serve((400, {"errors": ["x.jsonl:3: reward: must be a number"]}, 0))
    with Client(server.url, "tok", backoff=0.01) as client, pytest.raises(GagarAPIError) as error:
        client.batch_id("b")
    assert (error.value.status, error.value.errors) == (400, ["x.jsonl:3: reward: must be a number"])
    assert str(error.value) == "400: x.jsonl:3: reward: must be a number"
    assert len(server.seen) == 1


def test_a_slow_answer_times_out(serve):
    server = serve((200, [], 2))
    with Client(server.url, "tok", timeout=0.2) as client, pytest.raises(GagarError, match="no answer within"):
        client.batch_id("b")


def test_a_retried_upload_sends_the_whole_file_again_with_its_encoding(serve, tmp_path):
    path = tmp_path / "step.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"group_id": "g"}\n'))
    server = serve((503, {}, 0), (201, {"created": True}, 0))
    with Client(server.url, "tok", backoff=0.01) as client:
        assert client.upload(path, batch="run/1") == {"created": True}
    for _, url, headers, body in server.seen:
        assert url == "/api/batches?name=run%2F1&filename=step.jsonl.gz"
        assert headers["Content-Encoding"] == "gzip" and headers["Content-Length"] == str(len(body))
        assert body == path.read_bytes()


def test_an_upload_into_an_existing_batch_says_append(serve, tmp_path):
    path = tmp_path / "more.jsonl"
    path.write_bytes(b'{"group_id": "g"}\n')
    server = serve((200, {"created": False}, 0))
    with Client(server.url, "tok") as client:
        client.upload(path, batch="run/1", append=True)
    assert server.seen[0][1] == "/api/batches?name=run%2F1&filename=more.jsonl&append=true"


def test_grade_step_falls_back_to_plain_grpo_when_the_app_keeps_failing(serve):
    server = serve(*[(503, {}, 0)] * 4)
    rollouts = [{"group_id": "g", "trajectory_id": "a", "reward": 1.0}, {"group_id": "g", "trajectory_id": "b",
                                                                          "reward": 0.0}]
    with Client(server.url, "tok", retries=3, backoff=0.01) as client:
        result = client.grade_step(rollouts, run="r", step=1, deadline=5)
    # mean 0.5, sample std sqrt(0.5): the app's GRPO, on the scale of a graded step's values
    assert result.rewards == pytest.approx({("g", "a"): 0.5 / (0.5 ** 0.5 + 1e-6),
                                            ("g", "b"): -0.5 / (0.5 ** 0.5 + 1e-6)}, abs=1e-15)
    assert result.fallback == {"g": "app error: 503: Service Unavailable"}


def test_grade_step_never_retries_past_its_deadline(serve):
    server = serve(*[(503, {}, 0)] * 10)
    with Client(server.url, "tok", retries=10, backoff=0.2) as client:
        result = client.grade_step([{"group_id": "g", "trajectory_id": "a", "reward": 1.0}], run="r", step=1,
                                   deadline=1.0)
    assert result.fallback == {"g": "app error: 503: Service Unavailable"}
    assert len(server.seen) == 3  # at 0, 0.2 and 0.6 s; the next, at 1.4 s, would pass the deadline


def test_a_rollout_without_ids_is_refused_before_anything_is_sent(serve):
    server = serve()
    with Client(server.url, "tok") as client, pytest.raises(ValueError, match="needs group_id and trajectory_id"):
        client.grade_step([{"reward": 1.0}], run="r", step=1)
    assert server.seen == []


def test_the_client_imports_without_django():
    code = "import sys, gagar_client; assert not [m for m in sys.modules if m.startswith(('django', 'webapp'))]"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_waiting_for_advantages_gives_up_after_its_timeout_with_the_status(serve):
    status = {"gradings": {"queued": 3, "running": 1, "done": 0, "failed": 0}}
    server = serve((200, [{"id": 7}], 0), (202, status, 0))
    with Client(server.url, "tok") as client, pytest.raises(GagarError) as error:
        client.wait_for_advantages("b", timeout=0)
    assert str(error.value) == f"grading of 'b' not done after 0 s: {status['gradings']}"
    assert server.seen[1][1] == "/api/batches/7/advantages?format=jsonl&wait=0.0"


def test_failed_and_cancelled_groups_keep_grpo_and_are_logged_as_such(serve, caplog):
    rows = [{"group_id": g, "trajectory_id": t, "grpo_advantage": grpo, "reward_for_trainer": gagar}
            for g, t, grpo, gagar in (("g1", "a", 0.5, 0.7), ("g2", "a", 0.5, 0.6), ("g3", "a", 0.5, 0.8))]
    groups = [{"group_id": "g1", "state": "graded", "reason": "ranked by the grader"},
              {"group_id": "g2", "state": "failed", "reason": "grading failed: backend down"},
              {"group_id": "g3", "state": "cancelled", "reason": "grading cancelled: cancelled by rita"}]
    server = serve((202, {"batch_id": 7}, 0),
                   (200, {"batch": "r/step-1", "complete": True, "groups": groups, "trajectories": rows}, 0))
    records = [{"group_id": g, "trajectory_id": "a", "reward": 1.0} for g in ("g1", "g2", "g3")]
    with Client(server.url, "tok") as client, caplog.at_level("WARNING", logger="gagar_client"):
        values, fallback = step_values(client, records, run="r", step=1, grader="heuristic", deadline=5,
                                       advantage_config=None)
    assert values == [0.7, 0.5, 0.5]
    assert fallback == {"g2": "grading failed: backend down", "g3": "grading cancelled: cancelled by rita"}
    assert caplog.messages == [
        "GAGAR r step 1: group g2 gets its plain GRPO advantages (grading failed: backend down)",
        "GAGAR r step 1: group g3 gets its plain GRPO advantages (grading cancelled: cancelled by rita)"]
