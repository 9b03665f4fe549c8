"""A remote reward server for OpenRLHF, and for verl's reward-loop workers, that grades each
prompt's responses together.

OpenRLHF's `--remote_rm_url` (0.11: `--reward.remote_url`) POSTs JSON
`{"query": [...], "prompts": [...], "labels": [...]}` and reads `"rewards"` (and
`"scores"`) from the answer; 0.9 and later send one request per finished sample, older
versions one per micro-batch or rollout batch, from several actors at once. GAGAR ranks a
whole group, so this server parks each sample until `--group-size` responses
(`n_samples_per_prompt`) of its group have arrived, across requests, grades complete
groups with `gagar_client.grouped`'s buffer (the same code and fallbacks as verl's reward
loop), and answers each request once all its samples have values: `"rewards"`, GAGAR's
values, and `"scores"`, the test scores (OpenRLHF's dynamic filtering reads them as the
pass verdict).

    GAGAR_TOKEN=... python -m gagar_client.reward_server --app-url http://gagar:8000 \\
        --run run-7 --group-size 8 --test-score my_tests:score --port 5000

`--test-score module:function` is your test verdict, `f(query, prompt, label) -> float |
{"score": ...}`, called with OpenRLHF's query (prompt and response), prompt and label.
A client that scores its samples itself sends `test_scores`, `group_keys` and `responses`
instead (`gagar_client.grouped` with `buffer_url`, from each of verl's reward-loop
workers); the fields are in `parse_request`. Only the standard library and httpx: it runs
wherever the client is installed.

A request is answered on its own: one with a sample the app would refuse (a control
character or more than 501 characters in its group key, an unpaired surrogate in its text,
a record over the app's line limit: `gagar_client.steps.record_problems`) gets 400 with the
reason and parks nothing; a body over `--max-body-bytes` gets 413 unread; a request not
read whole within `--read-timeout` seconds (a client stalled or trickling) gets 408 and its
connection closed; a group the app refuses all the same gets its plain GRPO advantages,
logged, and never takes the other groups of its app request with it. A group the app did
not rank (late, unreachable, refusing it) gets its plain GRPO advantages on the app's scale
(`gagar_client.grpo`), never its test scores beside other groups' normalised values.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import hashlib
import io
import json
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gagar_client import grouped
from gagar_client.grpo import grpo_values
from gagar_client.steps import Sample, logger, sample_problems, score_number, test_rewards, test_score_function

PATH = "/get_reward"
# OpenRLHF gives up on a request after 180 s and sends it again, which would park its
# samples twice: every request must be answered before then.
OPENRLHF_TIMEOUT_S = 180.0
READ_TIMEOUT_S = 60.0  # for reading one request whole: its line, headers and body
MAX_BODY_BYTES = 256 * 1024 * 1024
MAX_PROBLEMS = 10  # bad samples a 400 names; it counts the rest


class BadRequest(ValueError):
    """A request this server cannot take; the message says why."""


@dataclass(frozen=True)
class Incoming:
    """One sample of a request: its group, response and prompt, and what its test score is
    computed from when the request sent none (`query`, `label`)."""

    group: str
    response: str
    prompt: str | None
    query: str | None
    label: Any
    test_score: float | None

    def transcript(self) -> list[dict]:
        """The prompt, when the request sent one, and the response."""
        prompt = [{"role": "user", "content": self.prompt}] if self.prompt is not None else []
        return prompt + [{"role": "assistant", "content": self.response}]

    def problems(self, score: float) -> list[str]:
        """Why the app would refuse this sample with its test score `score`, named by what the
        request sent; empty when the app takes it."""
        response = "the response ('responses', or 'query' less its prompt)"
        names = {"group_id": "its group key ('group_keys')", "patch": response, "line": "the sample",
                 "messages[0].content": response if self.prompt is None else "its prompt ('prompts')",
                 "messages[1].content": response}
        return sample_problems(self.group, Sample(reward=score, patch=self.response, messages=self.transcript()),
                               names)


def parse_request(body: bytes) -> tuple[list[Incoming], int | None]:
    """A request's samples, in order, and the `group_size` it expects (None when it sent none).

    The body is a JSON object of equally long lists, one entry per sample:

    - `query`: the prompt and response as one text (OpenRLHF's);
    - `prompts`: the prompt (OpenRLHF's), the transcript's user message;
    - `labels`: what `--test-score` gets as its label (OpenRLHF's; None each when absent);
    - `responses`: the response text; without it, the query less its prompt;
    - `group_keys`: the sample's group; without it, `prompt-<digest of the prompt>`;
    - `test_scores`: finite numbers; without them, `--test-score` computes them.

    Each sample needs a response (`responses`, or `query` and `prompts`) and a group
    (`group_keys`, or `prompts`). `group_size`, a number, is checked against the server's.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON") from None
    if not isinstance(data, dict) or ("query" not in data and "responses" not in data):
        raise BadRequest("the body must be a JSON object with a 'query' list (prompt and response texts) or "
                         "a 'responses' list")
    if "prompts" not in data and "group_keys" not in data:
        raise BadRequest("no 'prompts' list: GAGAR finds each response's group by its prompt, which OpenRLHF "
                         "sends from version 0.5.9 on (or send 'group_keys')")
    if "prompts" not in data and "responses" not in data:
        raise BadRequest("no 'prompts' list: the response is the query less its prompt (or send 'responses')")
    fields = {name: data[name] for name in ("query", "prompts", "labels", "responses", "group_keys", "test_scores")
              if name in data}
    for name in ("query", "prompts", "responses", "group_keys"):
        values = fields.get(name, [])
        if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
            raise BadRequest(f"'{name}' must be a list of strings")
    if not isinstance(fields.get("labels", []), list):
        raise BadRequest("'labels' must be a list")
    scores = fields.get("test_scores", [])
    if not isinstance(scores, list) or not all(
            isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)
            for score in scores):
        raise BadRequest("'test_scores' must be a list of finite numbers")
    lengths = [len(values) for values in fields.values()]
    if len(set(lengths)) > 1:
        names = [f"'{name}'" for name in fields]
        raise BadRequest(f"{', '.join(names[:-1])} and {names[-1]} must be equally long; got "
                         f"{', '.join(map(str, lengths[:-1]))} and {lengths[-1]}")
    group_size = data.get("group_size")
    if group_size is not None and (isinstance(group_size, bool) or not isinstance(group_size, int)):
        raise BadRequest(f"'group_size' must be a whole number; got {group_size!r}")
    samples = []
    for i in range(lengths[0]):
        prompt = fields["prompts"][i] if "prompts" in fields else None
        query = fields["query"][i] if "query" in fields else None
        samples.append(Incoming(
            group=fields["group_keys"][i] if "group_keys" in fields else group_key(prompt),
            response=fields["responses"][i] if "responses" in fields else response_of(query, prompt),
            prompt=prompt, query=query, label=fields["labels"][i] if "labels" in fields else None,
            test_score=float(fields["test_scores"][i]) if "test_scores" in fields else None))
    return samples, group_size


def group_key(prompt: str) -> str:
    """The group's name in the app: a digest, since a prompt may be long and hold newlines."""
    return "prompt-" + hashlib.sha256(prompt.encode()).hexdigest()[:16]


def response_of(query: str, prompt: str) -> str:
    """The response text: the query without its prompt, or all of it when it does not start
    with the prompt (OpenRLHF before 0.9 decodes padded sequences: pad tokens come first)."""
    return query[len(prompt):] if query.startswith(prompt) else query


class RewardServer(ThreadingHTTPServer):
    """A thread per request; the groups live on one event loop in a thread of their own."""

    daemon_threads = True
    request_queue_size = 1024  # OpenRLHF 0.9+ opens a connection per sample, hundreds at once

    def __init__(self, address: tuple[str, int], *, settings: grouped.Settings,
                 test_score: Callable[..., float | dict] | None, test_score_name: str | None,
                 read_timeout: float = READ_TIMEOUT_S, max_body_bytes: int = MAX_BODY_BYTES):
        self.settings = settings
        self.test_score = test_score
        self.test_score_name = test_score_name
        self.read_timeout = read_timeout
        self.max_body_bytes = max_body_bytes
        self.wait_limit = grouped.wait_limit(group_timeout=settings.group_timeout,
                                             batch_window=settings.batch_window, deadline=settings.deadline,
                                             timeout=settings.timeout)
        self.loop = asyncio.new_event_loop()  # before binding: a failed bind calls server_close
        super().__init__(address, _Handler)
        threading.Thread(target=self.loop.run_forever, name="gagar-groups", daemon=True).start()

    def server_close(self) -> None:
        super().server_close()
        self.loop.call_soon_threadsafe(self.loop.stop)

    def rewards(self, samples: list[Incoming], group_size: int | None) -> tuple[list[float], list[float]]:
        """Each sample's GAGAR value and test score, in order, once every sample's group is done.
        BadRequest, before anything is parked, for a request this server cannot take."""
        if group_size is not None and group_size != self.settings.group_size:
            raise BadRequest(f"this server groups {self.settings.group_size} responses (--group-size); the request "
                             f"expects {group_size}: give both the trainer's responses per prompt")
        scores = self._test_scores(samples)
        problems = [f"sample {i}: {problem}" for i, (sample, score) in enumerate(zip(samples, scores, strict=True))
                    for problem in sample.problems(score)]
        if problems:
            more = f"; and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
            raise BadRequest(f"the app would refuse {'this sample' if len(samples) == 1 else 'samples of this request'}"
                             f", so none is parked: {'; '.join(problems[:MAX_PROBLEMS])}{more}")
        parked = [(sample.group, Sample(reward=score, patch=sample.response, messages=sample.transcript()))
                  for sample, score in zip(samples, scores, strict=True)]
        values = asyncio.run_coroutine_threadsafe(_park(self.settings, parked), self.loop)
        try:
            return values.result(timeout=self.wait_limit), scores
        except concurrent.futures.TimeoutError:
            # The buffer answers within the bound (grouped._Buffer._grade) unless its loop is
            # stuck: answer rather than let the client time out (OpenRLHF then sends the samples
            # again), on the app's scale over what this request holds of each group.
            values.cancel()
            logger.warning("GAGAR %s: a request of %d samples had no values after %g s; they get the plain "
                           "GRPO advantages of their test scores within the request", self.settings.run,
                           len(parked), self.wait_limit)
            keys = [(sample.group, str(i)) for i, sample in enumerate(samples)]
            return grpo_values(scores, keys, json.loads(self.settings.advantage_config) or None), scores

    def _test_scores(self, samples: list[Incoming]) -> list[float]:
        """The scores the request sent, or --test-score's verdicts on its samples."""
        if all(sample.test_score is not None for sample in samples):
            return [sample.test_score for sample in samples]
        if self.test_score is None:
            raise BadRequest("no 'test_scores', and this server was started without --test-score: send each "
                             "sample's test score, or start the server with --test-score module:function")
        if any(sample.query is None or sample.prompt is None for sample in samples):
            raise BadRequest("no 'test_scores': --test-score is called with each sample's query and prompt, so "
                             "send 'query' and 'prompts' too")
        return test_rewards([score_number(self.test_score(s.query, s.prompt, s.label)) for s in samples],
                            len(samples), f"test_score {self.test_score_name}")


async def _park(settings: grouped.Settings, samples: list[tuple[str, Sample]]) -> list[float]:
    # All of a request's samples are parked in one step of the loop, in order.
    calls = [grouped.park(settings, key, sample) for key, sample in samples]
    return list(await asyncio.gather(*calls))


class _Deadline(io.RawIOBase):
    """A connection's socket, read until a deadline: each read waits at most what is left of
    it, so a client that stalls, or trickles its bytes, gets TimeoutError however it spreads
    them, and its server thread is free again."""

    def __init__(self, connection: socket.socket, deadline: float):
        self.connection = connection
        self.deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not read in time")
        self.connection.settimeout(left)
        return self.connection.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server: RewardServer

    def setup(self) -> None:
        super().setup()
        # One request per connection (HTTP/1.0), read whole within --read-timeout of its accepting.
        self.rfile.close()
        self.rfile = io.BufferedReader(_Deadline(self.connection, time.monotonic() + self.server.read_timeout))

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if self.path != PATH:
            return self._answer(HTTPStatus.NOT_FOUND, {"error": f"POST the samples to {PATH}"})
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self._answer(HTTPStatus.LENGTH_REQUIRED, {"error": "send the body with a Content-Length"})
        if int(length) > self.server.max_body_bytes:
            return self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                                f"the body is {int(length)} bytes, over this server's limit of "
                                f"{self.server.max_body_bytes} (--max-body-bytes)")
        try:
            body = self.rfile.read(int(length))
        except TimeoutError:
            return self._refuse(HTTPStatus.REQUEST_TIMEOUT,
                                f"the body ({int(length)} bytes) was not received within "
                                f"{self.server.read_timeout:g} s (--read-timeout)")
        if len(body) < int(length):
            return self._refuse(HTTPStatus.BAD_REQUEST, f"the body ended after {len(body)} of {int(length)} bytes")
        try:
            samples, group_size = parse_request(body)
            rewards, scores = self.server.rewards(samples, group_size)
        except BadRequest as error:
            return self._answer(HTTPStatus.BAD_REQUEST, {"error": str(error)})
        except Exception as error:  # a mistake to fix (test_score failed, a 4xx from the app): say it
            logger.exception("GAGAR %s: a request failed", self.server.settings.run)
            return self._answer(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(error).__name__}: {error}"})
        self._answer(HTTPStatus.OK, {"rewards": rewards, "scores": scores})

    def _refuse(self, status: HTTPStatus, reason: str) -> None:
        """Answer `status` with `reason`, logged, and close the connection: its body is unread."""
        logger.warning("GAGAR %s: a request from %s answered %d: %s", self.server.settings.run,
                       self.client_address[0], status, reason)
        self.close_connection = True
        self._answer(status, {"error": reason})

    def _answer(self, status: HTTPStatus, body: dict) -> None:
        content = json.dumps(body).encode()
        self.connection.settimeout(self.server.read_timeout)  # the answer, not the reading, now
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)
        except OSError as error:  # the client left, or reads nothing
            self.close_connection = True
            logger.debug("GAGAR %s: an answer to %s was not delivered: %s", self.server.settings.run,
                         self.client_address[0], error)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        logger.debug("%s " + format, self.client_address[0], *args)  # one line per sample is too many

    def log_error(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        # A request line or headers not read in time ("Request timed out"), or malformed.
        logger.warning("GAGAR %s: a request from %s: " + format, self.server.settings.run, self.client_address[0],
                       *args)


def build_server(args: argparse.Namespace) -> RewardServer:
    """The server the command line describes, bound to its port; ValueError for a bad option."""
    token = os.environ.get(args.token_env)
    if not token:
        raise ValueError(f"the API token goes in the environment variable {args.token_env} (--token-env)")
    if args.group_size < 2:
        raise ValueError(f"--group-size must be OpenRLHF's n_samples_per_prompt, at least 2; got {args.group_size}")
    for name in ("group_timeout", "deadline", "timeout"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be above 0")
    if args.batch_window < 0:
        raise ValueError("--batch-window must be at least 0")
    if args.read_timeout <= 0:
        raise ValueError("--read-timeout must be above 0")
    if args.max_body_bytes < 1:
        raise ValueError("--max-body-bytes must be at least 1")
    try:
        advantage_config = json.loads(args.advantage_config)
    except ValueError:
        raise ValueError(f"--advantage-config must be a JSON object, got {args.advantage_config!r}") from None
    if not isinstance(advantage_config, dict):
        raise ValueError(f"--advantage-config must be a JSON object, got {args.advantage_config!r}")
    settings = grouped.Settings(url=args.app_url, token=token, run=args.run, grader=args.grader,
                                deadline=args.deadline, timeout=args.timeout,
                                advantage_config=json.dumps(advantage_config, sort_keys=True),
                                pass_threshold=args.pass_threshold, group_size=args.group_size,
                                group_timeout=args.group_timeout, batch_window=args.batch_window)
    wait = grouped.wait_limit(group_timeout=args.group_timeout, batch_window=args.batch_window,
                              deadline=args.deadline, timeout=args.timeout)
    if wait >= args.client_timeout:
        raise ValueError(f"--group-timeout + --batch-window + --deadline + --timeout (+{grouped.SLACK_S:g} s) is "
                         f"{wait:g} s: a client gives up after --client-timeout {args.client_timeout:g} s (OpenRLHF "
                         "then sends the request again), so keep it below that")
    test_score = None
    if args.test_score is not None:
        try:
            test_score = test_score_function(args.test_score)
        except (ImportError, AttributeError) as error:
            raise ValueError(f"--test-score {args.test_score}: {error}") from None
    return RewardServer((args.host, args.port), settings=settings, test_score=test_score,
                        test_score_name=args.test_score, read_timeout=args.read_timeout,
                        max_body_bytes=args.max_body_bytes)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gagar_client.reward_server",
                                     description="OpenRLHF's remote reward model, graded by GAGAR a group at a time.")
    parser.add_argument("--app-url", required=True, help="the GAGAR app, e.g. http://gagar:8000")
    parser.add_argument("--run", required=True, help="the run's name in the app; steps are <run>/step-<n>")
    parser.add_argument("--group-size", type=int, required=True, help="OpenRLHF's n_samples_per_prompt")
    parser.add_argument("--test-score", help="module:function, f(query, prompt, label) -> float; without it, "
                        "every request must send its 'test_scores'")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 for other machines)")
    parser.add_argument("--port", type=int, default=5000, help="0 picks a free port (printed)")
    parser.add_argument("--grader", default="heuristic", help="the app's grader profile")
    parser.add_argument("--group-timeout", type=float, default=60.0,
                        help="seconds a group waits for its missing responses, from its first")
    parser.add_argument("--batch-window", type=float, default=1.0,
                        help="seconds a complete group waits for others to share its app request")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds the app may take to rank a step")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for one request to the app")
    parser.add_argument("--pass-threshold", type=float, default=1.0, help="a test score this high passes")
    parser.add_argument("--advantage-config", default="{}", help="JSON overrides of the app's advantage config")
    parser.add_argument("--client-timeout", type=float, default=OPENRLHF_TIMEOUT_S,
                        help="seconds a client waits for an answer (OpenRLHF: 180); the bounds above must add "
                        "up to less")
    parser.add_argument("--token-env", default="GAGAR_TOKEN", help="the environment variable with the API token")
    parser.add_argument("--read-timeout", type=float, default=READ_TIMEOUT_S,
                        help="seconds a client has to send one request whole (line, headers, body); a slower one "
                        "gets 408 and its connection closed")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                        help="the largest request body taken; a larger one gets 413 unread")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server = build_server(args)
    except (ValueError, OSError) as error:  # a bad option, or the port taken
        parser.error(str(error))
    host, port = server.server_address[:2]
    print(f"GAGAR reward server for run {args.run}: http://{host}:{port}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
