"""GAGAR rewards from verl 0.9.1's reward loop, which scores one response per call.

verl 0.9.1's trainer scores each response on its own: its reward loop
(`verl/experimental/reward_loop`) sends every finished rollout to a reward-loop worker,
whose `naive` manager awaits `compute_score(data_source, solution_str, ground_truth,
extra_info, **reward_kwargs)` when it is a coroutine function. GAGAR ranks a whole group,
so this `compute_score` parks each call until the `group_size` (verl's `rollout.n`)
responses of its prompt have arrived, found by `extra_info[group_key]` as in
`gagar_client.verl`, then grades the group with the same client code as the batch path
and answers every parked call with its response's value.

Where the calls are parked: in this process, or, with `buffer_url`, in the one
`gagar_client.reward_server` that all of a run's reward-loop workers post to (verl sends
each response to a worker picked at random, each worker a process of its own).

Groups that complete within `batch_window` seconds of each other share one app request
(one step of the run in the app). A complete group that gets no GAGAR ranking (the app
late, unreachable, or refusing it) gets its plain GRPO advantages on the app's scale
(`gagar_client.grpo`), as on the batch path, never its test scores: those would sit beside
std-normalised values in the same step. A group still incomplete `group_timeout` seconds
after its first response arrived (a response lost, or scored where its group is not
parked) is not sent: no group's statistics can be taken where only part of it is, so each
of its calls gets its test score, logged as a warning, and verl's GRPO gives those
responses their plain Dr. GRPO advantage over the whole group (a validation of one
response per prompt reports its test scores so).

Pending groups are kept per event loop (the loop running the call), never in a loop
made at import time: verl runs each reward-loop worker's calls in that worker's loop.

Groups that share an app request do not share its failures: a response the app would
refuse (`steps.record_problems`: a control character in its group key, an unpaired
surrogate, a line over the app's limit) is refused before it is parked, and a group the
app refuses all the same (a rule of a newer app) gets its plain GRPO advantages, logged
with the app's reason, while the others of its request are sent again without it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import httpx

from gagar_client.client import Client, GagarAPIError
from gagar_client.grpo import grpo_values
from gagar_client.steps import (
    Sample,
    group_records,
    logger,
    next_step,
    sample_problems,
    score_number,
    step_values,
    test_rewards,
    test_score_function,
)

# Thread hand-offs, JSON and the network on top of the bounds that add up to a wait for values.
SLACK_S = 1.0
# How the app names a refused line of a step: `step-<n>.jsonl:<line>: <field>: <reason>`, the
# file name webapp/api/endpoints.py gives a step's body; line n is the step's n-th record.
_REFUSED_LINE = re.compile(r"step-\d+\.jsonl:(\d+): (.*)", re.DOTALL)


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict,
    *,
    test_score: str | Callable[..., float | dict],
    group_size: int,
    url: str | None = None,
    run: str | None = None,
    buffer_url: str | None = None,
    token_env: str = "GAGAR_TOKEN",
    group_key: str = "index",
    pass_threshold: float | None = None,
    grader: str | None = None,
    deadline: float = 60.0,
    group_timeout: float = 60.0,
    batch_window: float = 1.0,
    timeout: float = 30.0,
    advantage_config: dict | None = None,
) -> float:
    """GAGAR's redistributed advantage of this response, once its whole group is graded.

    The keyword arguments come from verl's `reward_kwargs`, as for
    `gagar_client.verl.compute_score`, plus `group_size` (verl's
    `actor_rollout_ref.rollout.n`), `group_timeout` (seconds a group waits for its missing
    responses, from its first) and `batch_window` (seconds a complete group waits for
    others to share its app request). `test_score` may be a coroutine function.

    A complete group gets the batch path's values and fallbacks: the app not ranking it
    within `deadline` seconds, unreachable, or refusing the group, its plain GRPO
    advantages on the app's scale, logged. Another 4xx answer from the app raises in every
    call of the request.

    With `buffer_url` (a `gagar_client.reward_server`'s /get_reward address) the response
    and its test score are posted there instead, to be parked with those of every other
    worker; `url`, `run`, `grader`, `pass_threshold` and `advantage_config` are then the
    server's options and may not be given. The server unreachable or silent past its own
    bound: the test score, logged (this worker has one response of the group, no group to
    normalise). A 4xx or 500 answer raises with the server's reason.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"compute_score: group_size must be verl's rollout.n, at least 2; got {group_size!r}")
    if not isinstance(extra_info, dict) or group_key not in extra_info:
        raise ValueError(f"compute_score: the response has no extra_info[{group_key!r}] (group_key) to find its "
                         "prompt's group by; write one into the dataset's extra_info")
    server_options = {"url": url, "run": run, "grader": grader, "pass_threshold": pass_threshold,
                      "advantage_config": advantage_config}
    if buffer_url is not None:
        if names := [name for name, value in server_options.items() if value is not None]:
            raise ValueError(f"compute_score: with buffer_url the reward server grades, with its own options; "
                             f"drop {', '.join(names)} from reward_kwargs")
    elif url is None or run is None:
        raise ValueError("compute_score: reward_kwargs need url and run (the app and the run's name), or "
                         "buffer_url (a gagar_client.reward_server that grades for every reward-loop worker)")
    reward = await _test_score(test_score, data_source=data_source, solution_str=solution_str,
                               ground_truth=ground_truth, extra_info=extra_info)
    sample = Sample(reward=reward, patch=solution_str, messages=[{"role": "assistant", "content": solution_str}])
    key = str(extra_info[group_key])
    if problems := sample_problems(key, sample, {"group_id": f"extra_info[{group_key!r}]", "patch": "solution_str",
                                                 "messages[0].content": "solution_str", "line": "the response"}):
        raise ValueError(f"compute_score: the app would refuse this response: {'; '.join(problems)}")
    if buffer_url is not None:
        bound = wait_limit(group_timeout=float(group_timeout), batch_window=float(batch_window),
                           deadline=float(deadline), timeout=float(timeout))
        return await _ask_buffer(buffer_url, key, sample, group_size=group_size, bound=bound, timeout=float(timeout))
    token = os.environ.get(token_env)
    if not token:
        raise ValueError(f"compute_score: the API token goes in the environment variable {token_env} (token_env)")
    settings = Settings(url=url, token=token, run=run, grader="heuristic" if grader is None else grader,
                        deadline=float(deadline), timeout=float(timeout),
                        advantage_config=json.dumps(advantage_config or {}, sort_keys=True),
                        pass_threshold=1.0 if pass_threshold is None else float(pass_threshold),
                        group_size=group_size, group_timeout=float(group_timeout), batch_window=float(batch_window))
    return await park(settings, key, sample)


def wait_limit(*, group_timeout: float, batch_window: float, deadline: float, timeout: float) -> float:
    """Seconds a parked response may wait for its value: its group waits at most group_timeout
    for its responses, then batch_window for others to share its app request, then the
    grading takes at most deadline + one request timeout; plus slack."""
    return group_timeout + batch_window + deadline + timeout + SLACK_S


async def _ask_buffer(buffer_url: str, key: str, sample: Sample, *, group_size: int, bound: float,
                      timeout: float) -> float:
    """The response's value from the reward server at `buffer_url`, which answers within
    `bound` seconds (its own fallback); the test score, logged, when no answer comes."""
    body = {"responses": [sample.patch], "group_keys": [key], "test_scores": [sample.reward],
            "group_size": group_size}
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, read=bound + SLACK_S)) as http:
            answer = await http.post(buffer_url, json=body)
    except httpx.TransportError as error:  # refused, unresolvable, or silent past its bound
        logger.warning("GAGAR reward server %s: no answer (%s: %s); a response of group %s keeps its test score",
                       buffer_url, type(error).__name__, error, key)
        return sample.reward
    if answer.status_code == HTTPStatus.OK:
        return answer.json()["rewards"][0]
    if answer.is_client_error or answer.status_code == HTTPStatus.INTERNAL_SERVER_ERROR:
        # A mistake to fix (a bad request, a 4xx from the app behind the server): say it.
        raise GagarAPIError(answer.status_code, [f"reward server {buffer_url}: {_error_of(answer)}"])
    logger.warning("GAGAR reward server %s: answered %d (%s); a response of group %s keeps its test score",
                   buffer_url, answer.status_code, _error_of(answer), key)
    return sample.reward


def _error_of(answer: httpx.Response) -> str:
    """The reward server's reason, or the answer's text when it is not the server's JSON (a proxy)."""
    try:
        return str(answer.json()["error"])
    except (ValueError, KeyError, TypeError):
        return answer.text[:200] or answer.reason_phrase


def park(settings: Settings, key: str, sample: Sample) -> asyncio.Future:
    """Park one response of the group `key` in the running loop's buffer; the future gets the
    response's value once its group is graded, or its test score once the group times out.
    Also what gagar_client.reward_server parks its samples with."""
    return _buffer().park(settings, key, sample)


def park_group(settings: Settings, key: str, samples: list[Sample]) -> list[asyncio.Future]:
    """Park a group handed over whole (verifiers' and ART's group scoring) in the running
    loop's buffer: it is graded with the groups that complete within `batch_window` of it,
    and each future gets its sample's value. `settings.group_timeout` plays no part."""
    return _buffer().park_group(settings, key, samples)


async def _test_score(test_score, **sample) -> float:
    """The test verdict as a float; a plain function runs in a thread, not in the loop."""
    score = test_score_function(test_score)
    if inspect.iscoroutinefunction(score):
        value = await score(**sample)
    else:
        value = await asyncio.get_running_loop().run_in_executor(None, functools.partial(score, **sample))
    return test_rewards([score_number(value)], 1, f"compute_score: test_score {test_score!r}")[0]


@dataclass(frozen=True)
class Settings:
    """One call's reward_kwargs, or the reward server's options (the token read): only groups
    with equal settings share a request."""

    url: str
    token: str
    run: str
    grader: str
    deadline: float
    timeout: float
    advantage_config: str  # JSON, to be hashable
    pass_threshold: float
    group_size: int
    group_timeout: float
    batch_window: float


@dataclass(eq=False)
class _Group:
    """One prompt's responses so far, each with the parked call waiting for its value."""

    key: str
    samples: list[Sample] = field(default_factory=list)
    calls: list[asyncio.Future] = field(default_factory=list)
    expiry: asyncio.TimerHandle | None = None


class _Buffer:
    """The groups of one event loop. Touched only from that loop's thread, so no locks."""

    def __init__(self) -> None:
        self.filling: dict[tuple[Settings, str], _Group] = {}
        self.complete: dict[Settings, list[_Group]] = {}
        self.requests: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks
        self.just_completed: set[tuple[Settings, str]] = set()  # for group_timeout seconds after completing

    def park(self, settings: Settings, key: str, sample: Sample) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        group = self.filling.get((settings, key))
        if group is None:
            if (settings, key) in self.just_completed:
                logger.warning("GAGAR %s: group %s has another response within %g s of its %d being complete: "
                               "more responses per prompt than group_size? Then each group is graded in parts",
                               settings.run, _shown(key), settings.group_timeout, settings.group_size)
            group = self.filling[(settings, key)] = _Group(key)
            group.expiry = loop.call_later(settings.group_timeout, self._expire, settings, group)
        call = loop.create_future()
        group.samples.append(sample)
        group.calls.append(call)
        if len(group.samples) == settings.group_size:
            del self.filling[(settings, key)]
            group.expiry.cancel()
            self.just_completed.add((settings, key))
            loop.call_later(settings.group_timeout, self.just_completed.discard, (settings, key))
            self._wait_for_request(settings, group)
        return call

    def park_group(self, settings: Settings, key: str, samples: list[Sample]) -> list[asyncio.Future]:
        loop = asyncio.get_running_loop()
        group = _Group(key, list(samples), [loop.create_future() for _ in samples])
        self._wait_for_request(settings, group)
        return group.calls

    def _wait_for_request(self, settings: Settings, group: _Group) -> None:
        """Queue a complete group for the app request that goes out `batch_window` after the
        first group queued for it."""
        waiting = self.complete.setdefault(settings, [])
        waiting.append(group)
        if len(waiting) == 1:
            asyncio.get_running_loop().call_later(settings.batch_window, self._send, settings)

    def _expire(self, settings: Settings, group: _Group) -> None:
        del self.filling[(settings, group.key)]
        logger.warning("GAGAR %s: group %s has %d of %d responses after %g s; they keep their test scores "
                       "(a group must be scored whole in one process)", settings.run, group.key,
                       len(group.samples), settings.group_size, settings.group_timeout)
        _answer(group.calls, [s.reward for s in group.samples])

    def _send(self, settings: Settings) -> None:
        groups = self.complete.pop(settings)
        request = asyncio.get_running_loop().create_task(self._grade(settings, groups))
        self.requests.add(request)
        request.add_done_callback(self.requests.discard)

    async def _grade(self, settings: Settings, groups: list[_Group]) -> None:
        calls = [call for group in groups for call in group.calls]
        # The client answers within deadline + one request timeout once it runs; this bound
        # also covers the wait for a free thread and a run's first request (its latest step),
        # so that a slow app never holds a call past `wait_limit`.
        bound = settings.deadline + settings.timeout
        grading = asyncio.get_running_loop().run_in_executor(None, _grade_step, settings, groups)
        try:
            values = await asyncio.wait_for(grading, timeout=bound)
        except asyncio.TimeoutError:  # noqa: UP041 (the client runs on 3.10, where it is not TimeoutError)
            values = [value for group in groups
                      for value in _plain_grpo(settings, group, f"the app did not answer within {bound:g} s")]
        except Exception as error:  # a mistake to fix (a 4xx answer): every parked call raises it
            for call in calls:
                if not call.done():
                    call.set_exception(error)
            return
        _answer(calls, values)


def _answer(calls: list[asyncio.Future], values: list[float]) -> None:
    for call, value in zip(calls, values, strict=True):
        if not call.done():  # verl may have cancelled the call
            call.set_result(value)


def _grade_step(settings: Settings, groups: list[_Group]) -> list[float]:
    """Each response's value, group by group in arrival order, from one app request (a thread:
    the client blocks). A group the app refuses by its lines (a 400 naming them) gets its
    plain GRPO advantages, logged with the app's reasons, and the others are sent again
    without it, as the same step (a refused step leaves nothing in the app), within the one
    deadline. Any other 4xx raises: a mistake to fix."""
    values: dict[int, list[float]] = {}
    sending = list(range(len(groups)))
    end = time.monotonic() + settings.deadline
    with Client(settings.url, settings.token, timeout=settings.timeout) as client:
        step = next_step(settings.run, client)
        while sending:
            records, owners = [], []
            for position, index in enumerate(sending):
                group = groups[index]
                records += group_records(group.key, group.samples, position=position, statement=None,
                                         pass_threshold=settings.pass_threshold)
                owners += [index] * len(group.samples)
            try:
                # append: each reward-loop worker process counts its own steps, so two may send the same number.
                answer, _ = step_values(client, records, run=settings.run, step=step, grader=settings.grader,
                                        deadline=max(end - time.monotonic(), 0.0),
                                        advantage_config=json.loads(settings.advantage_config) or None, append=True)
            except GagarAPIError as error:
                refused = _refused(error, owners) if error.status == HTTPStatus.BAD_REQUEST else {}
                if not refused:
                    raise
                for index, reasons in refused.items():
                    values[index] = _plain_grpo(settings, groups[index],
                                                f"the app refused it: {'; '.join(reasons[:5])}")
                sending = [index for index in sending if index not in refused]
                continue
            for index, value in zip(owners, answer, strict=True):
                values.setdefault(index, []).append(value)
            break
    return [value for index in range(len(groups)) for value in values[index]]


def _refused(error: GagarAPIError, owners: list[int]) -> dict[int, list[str]]:
    """The groups (by index) whose lines the app's 400 names, each with the app's reasons."""
    refused: dict[int, list[str]] = {}
    for message in error.errors:
        match = _REFUSED_LINE.fullmatch(message)
        if match and 1 <= int(match[1]) <= len(owners):
            reasons = refused.setdefault(owners[int(match[1]) - 1], [])
            if match[2] not in reasons:
                reasons.append(match[2])
    return refused


def _plain_grpo(settings: Settings, group: _Group, reason: str) -> list[float]:
    """The group's plain GRPO advantages, as the app gives them under the settings' advantage
    config (its trajectories named r1.. as `group_records` names them), logged with `reason`."""
    logger.warning("GAGAR %s: group %s is not graded, %s; its %d responses get their plain GRPO advantages",
                   settings.run, _shown(group.key), reason, len(group.samples))
    keys = [(group.key, f"r{i}") for i in range(1, len(group.samples) + 1)]
    return grpo_values([sample.reward for sample in group.samples], keys,
                       json.loads(settings.advantage_config) or None)


def _shown(key: str) -> str:
    """A group key for a log line: quoted, control characters escaped, at most 100 characters."""
    return repr(key if len(key) <= 100 else key[:100] + "...")


_buffers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Buffer] = weakref.WeakKeyDictionary()
_buffers_lock = threading.Lock()  # loops in other threads may ask for their buffer at once


def _buffer() -> _Buffer:
    loop = asyncio.get_running_loop()
    with _buffers_lock:
        if loop not in _buffers:
            _buffers[loop] = _Buffer()
        return _buffers[loop]
