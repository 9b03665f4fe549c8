"""The reward server (`python -m gagar_client.reward_server`) answers each request on its own:
a sample the app would refuse gets its request a 400 and never reaches the app; a group the
app refuses all the same gets its plain GRPO advantages, logged, and the other groups of its
app request are graded; the app late, hung or unreachable gives plain GRPO advantages too,
on the app's scale, never test scores; a client that stalls or trickles is cut off after
--read-timeout; a body over --max-body-bytes is refused unread. The server runs in this process, against the live
app (no worker: a step's groups get their GRPO advantages at the deadline). OpenRLHF's own
request code against the server: tests/trainers/test_openrlhf.py."""

import asyncio
import json
import math
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from gagar_client import Client
from gagar_client.grpo import grpo_values
from gagar_client.reward_server import _parser, build_server
from gagar_client.steps import Sample, group_records

GOOD = {"responses": ["fix a", "fix b", "no fix", "half a fix"], "test_scores": [1.0, 1.0, 0.0, 0.0]}
# What the app's plain GRPO gives GOOD's test scores (about +-0.866): the scale of every fallback.
GOOD_GRPO = grpo_values(GOOD["test_scores"], [("g", f"r{i}") for i in range(1, 5)])


@pytest.fixture
def reward_server(monkeypatch):
    """`reward_server(app_url, *options)` starts a server on a free port, in a thread of this
    process, and returns its URL and run; stopped after the test."""
    monkeypatch.setenv("GAGAR_TOKEN_TEST", "unused")
    started = []

    def start(app_url="http://127.0.0.1:9", *options):
        run = f"rs-{uuid.uuid4().hex[:8]}"  # step numbers are counted per run and process
        args = _parser().parse_args(["--app-url", app_url, "--run", run, "--group-size", "4", "--port", "0",
                                     "--token-env", "GAGAR_TOKEN_TEST", *options])
        server = build_server(args)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/get_reward", run

    start.started = started
    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture
def graded_server(reward_server, live_server, researcher, monkeypatch):
    """A server against the live app with a researcher's token; the app's client too."""
    from webapp.api.services import api_token_create

    token = api_token_create(user=researcher, name="reward server")[1]
    monkeypatch.setenv("GAGAR_TOKEN_TEST", token)
    url, run = reward_server(live_server.url, "--deadline", "2", "--group-timeout", "20", "--batch-window", "1")
    with Client(live_server.url, token) as app:
        yield url, run, app


def post(url: str, body: dict) -> httpx.Response:
    # json.dumps escapes an unpaired surrogate, as a JSON client sends it; httpx's json= would fail on it.
    return httpx.post(url, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
                      timeout=60)


def group(key: str, **fields) -> dict:
    return {**GOOD, "group_keys": [key] * 4, "group_size": 4, **fields}


def step_trajectories(batch: str) -> dict[str, int]:
    from webapp.models import Group

    return dict(Group.objects.filter(batch__name=batch).values_list("group_id", "n_trajectories"))


@pytest.mark.django_db(transaction=True)
def test_bad_samples_get_400_alone_and_another_clients_group_of_the_window_is_graded(graded_server):
    url, run, _ = graded_server
    bad = {
        "a control character in the group key": (group("task\x07b"), "sample 0: its group key ('group_keys'): "
                                                  "must not contain control characters"),
        "a C1 control character in the group key": (group("task\x85c"), "must not contain control characters"),
        "an over-long group key": (group("k" * 502), "sample 0: its group key ('group_keys'): is 502 characters "
                                   "long, over the limit of 501"),
        "an unpaired surrogate in a response": (group("task-d", responses=["ok", "bad \ud800", "ok", "ok"]),
                                                "sample 1: the response ('responses', or 'query' less its prompt): "
                                                "contains an unpaired surrogate escape"),
    }
    with ThreadPoolExecutor(8) as pool:
        good = pool.submit(post, url, group("task-a"))
        refused = {name: pool.submit(post, url, body) for name, (body, _) in bad.items()}
        good, refused = good.result(), {name: answer.result() for name, answer in refused.items()}

    for name, answer in refused.items():
        assert answer.status_code == 400, (name, answer.text)
        assert bad[name][1] in answer.json()["error"], name
        assert answer.json()["error"].startswith("the app would refuse samples of this request, so none is parked")
    assert good.status_code == 200, good.text
    rewards = good.json()["rewards"]
    assert len(rewards) == 4 and rewards != GOOD["test_scores"] and math.isclose(sum(rewards), 0, abs_tol=1e-6)
    (group_id, trajectories), = step_trajectories(f"{run}/step-0").items()
    assert group_id.startswith("task-a:") and trajectories == 4


@pytest.mark.django_db(transaction=True)
def test_a_group_the_app_refuses_gets_its_plain_grpo_and_the_others_of_its_step_are_graded(graded_server,
                                                                                             caplog):
    url, run, app = graded_server
    # The server's first step (0) starts its count; another writer then holds this group's name
    # in its next step (1) already: the app refuses the group's lines.
    assert post(url, group("task-z")).status_code == 200
    samples = [Sample(reward=score, patch=response, messages=[{"role": "assistant", "content": response}])
               for response, score in zip(GOOD["responses"], GOOD["test_scores"], strict=True)]
    taken = group_records("task-x", samples, position=0, statement=None, pass_threshold=1.0)[0]["group_id"]
    app.grade_step([{"group_id": taken, "trajectory_id": "r1", "reward": 0.5, "patch": "another"}], run=run,
                   step=1, deadline=0)

    with ThreadPoolExecutor(2) as pool, caplog.at_level("WARNING", logger="gagar_client"):
        refused = pool.submit(post, url, group("task-x"))
        time.sleep(0.3)  # within the batch window: one app request, task-x first
        graded = pool.submit(post, url, group("task-y"))
        refused, graded = refused.result(), graded.result()

    assert refused.status_code == 200, refused.text
    assert refused.json()["rewards"] == pytest.approx(GOOD_GRPO, abs=1e-9)
    assert graded.status_code == 200, graded.text
    assert graded.json()["rewards"] == pytest.approx(GOOD_GRPO, abs=1e-6)  # no worker: the app's at the deadline
    held = step_trajectories(f"{run}/step-1")
    assert held.pop(taken) == 1
    (group_id, trajectories), = held.items()
    assert group_id.startswith("task-y:") and trajectories == 4
    assert (f"GAGAR {run}: group 'task-x' is not graded, the app refused it: trajectory_id: conflicts with the "
            f"content already imported into batch '{run}/step-1' for this trajectory; group_id: group already "
            f"imported into batch '{run}/step-1'; its trajectories cannot change; its 4 responses get their plain "
            "GRPO advantages") in caplog.messages


def test_an_unreachable_app_gives_plain_grpo_on_the_apps_scale(reward_server):
    url, _ = reward_server("http://127.0.0.1:9", "--group-timeout", "5", "--batch-window", "0")
    answer = post(url, group("task-a"))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"rewards": pytest.approx(GOOD_GRPO, abs=1e-9), "scores": GOOD["test_scores"]}


@pytest.fixture
def hung_app():
    """An app that takes connections and never answers: the URL of a socket that listens only."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_an_app_that_never_answers_gives_plain_grpo_within_the_servers_bound(reward_server, hung_app, caplog):
    # Its latest step, then the step, each wait out a 4 s request timeout: 8 s, past the 7 s the
    # server allows a request (1 + 0 + 1 + 4 + 1). The grading's own bound, deadline + timeout,
    # answers first.
    url, run = reward_server(hung_app, "--deadline", "1", "--timeout", "4", "--group-timeout", "1",
                             "--batch-window", "0")
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="gagar_client"):
        answer = post(url, group("task-a"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["rewards"] == pytest.approx(GOOD_GRPO, abs=1e-9)
    assert 5 <= time.monotonic() - started < 7
    assert (f"GAGAR {run}: group 'task-a' is not graded, the app did not answer within 5 s; its 4 responses get "
            "their plain GRPO advantages") in caplog.messages


def test_a_request_the_buffer_never_answers_gets_plain_grpo_within_the_request(reward_server, caplog):
    url, run = reward_server("http://127.0.0.1:9", "--deadline", "0.5", "--timeout", "0.5", "--group-timeout",
                             "0.5", "--batch-window", "0")
    server = reward_server.started[-1]
    server.loop.call_soon_threadsafe(time.sleep, 3.5)  # its groups' loop stuck past the 2.5 s bound
    two_groups = {"responses": GOOD["responses"] * 2, "test_scores": GOOD["test_scores"] * 2,
                  "group_keys": ["task-a"] * 4 + ["task-b"] * 4}
    with caplog.at_level("WARNING", logger="gagar_client"):
        answer = post(url, two_groups)
    assert answer.status_code == 200, answer.text
    assert answer.json()["rewards"] == pytest.approx(GOOD_GRPO * 2, abs=1e-9)
    assert (f"GAGAR {run}: a request of 8 samples had no values after 2.5 s; they get the plain GRPO advantages "
            "of their test scores within the request") in caplog.messages
    # The loop free again, the request's parking is cancelled before the server stops.
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0.1), server.loop).result(timeout=5)


def raw(url: str, data: bytes, *, pause: float = 0.0, wait: float = 10.0) -> tuple[bytes, float]:
    """What the server sends back on a connection fed `data` (a byte each `pause` seconds when
    set, as long as the server reads), and the seconds until it closed the connection."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait) as connection:
        try:
            if pause:
                for byte in data:
                    connection.sendall(bytes([byte]))
                    time.sleep(pause)
            else:
                connection.sendall(data)
        except OSError:  # closed by the server while sending
            pass
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received, time.monotonic() - started


def test_a_stalled_or_trickling_client_is_cut_off_after_the_read_timeout(reward_server):
    url, _ = reward_server("http://127.0.0.1:9", "--read-timeout", "1", "--test-score", "math:isfinite")
    head = b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    with ThreadPoolExecutor(3) as pool:
        stalled_body = pool.submit(raw, url, head + b'{"query": [')
        silent = pool.submit(raw, url, b"")
        trickling = pool.submit(raw, url, head, pause=0.1)
        # Meanwhile the server answers others.
        assert httpx.post(url, content=b"{", timeout=5).status_code == 400

        answer, seconds = stalled_body.result()
        assert answer.startswith(b"HTTP/1.0 408 "), answer
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
            "error": "the body (100 bytes) was not received within 1 s (--read-timeout)"}
        assert 1 <= seconds < 3
        for connection in (silent, trickling):
            answer, seconds = connection.result()
            assert answer == b"" and 1 <= seconds < 3  # closed unanswered: the request was never whole


def test_a_body_over_the_limit_gets_413_unread(reward_server):
    url, _ = reward_server("http://127.0.0.1:9", "--max-body-bytes", "1000")
    answer, _ = raw(url, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 413 "), answer
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
        "error": "the body is 5000 bytes, over this server's limit of 1000 (--max-body-bytes)"}
    small = httpx.post(url, content=b"{" * 1000, timeout=5)
    assert (small.status_code, small.json()) == (400, {"error": "the body is not JSON"})


def test_verls_in_process_buffer_refuses_a_response_the_app_would_refuse():
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from gagar_client.grouped import compute_score

    call = compute_score("d", "fix", None, {"index": "task\x00a"}, test_score=lambda **_: 1.0, group_size=4,
                         url="http://127.0.0.1:9", run="r")
    with pytest.raises(ValueError, match=r"the app would refuse this response: extra_info\['index'\]: must not "
                                         "contain control characters"):
        with ThreadPoolExecutor(1) as thread:  # a loop of its own, whatever an earlier test left running here
            thread.submit(asyncio.run, call).result()
