"""The GAGAR Studio API from Python: upload rollouts, grade, fetch advantages, grade one step online.

Only httpx: a trainer installs this without the app. Every call has a timeout. Connection
errors and 502/503/504 answers are retried with exponential backoff (the app's writes are
idempotent: an upload of content already there and a step sent twice change nothing).
Every other error answer raises GagarAPIError with the app's messages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from gagar_client.grpo import grpo_values

RETRY_STATUSES = (502, 503, 504)
# The app answers a waiting call after at most this many seconds; longer waits ask again.
MAX_WAIT_S = 120.0
ENCODINGS = {".gz": "gzip", ".zst": "zstd"}


class GagarError(Exception):
    """The app could not be reached, or did not answer in time."""


class GagarAPIError(GagarError):
    """The app answered with an error: `status` and its `errors`, one sentence each."""

    def __init__(self, status: int, errors: list[str]):
        super().__init__(f"{status}: " + "; ".join(errors))
        self.status = status
        self.errors = errors


@dataclass(frozen=True)
class StepResult:
    """What `grade_step` gives a trainer.

    `rewards`: the value to use as the reward of every submitted (group_id, trajectory_id):
    the app's `reward_for_trainer` (the GAGAR advantage) where the group was ranked, and
    for a group in `fallback` its plain GRPO advantage, the app's or, when the app could not
    be reached at all, computed here as the app computes it (gagar_client.grpo): the same
    scale either way. `fallback`: group_id -> why the group has no GAGAR ranking.
    """

    batch: str
    rewards: dict[tuple[str, str], float]
    fallback: dict[str, str] = field(default_factory=dict)


class Client:
    """`Client("http://gagar:8000", token)`; use it as a context manager or call `close()`."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.Client(base_url=self.url + "/api", timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- batches ---------------------------------------------------------------------

    def batch_id(self, batch: str) -> int:
        """The id of the batch named `batch`."""
        found = self._request("GET", "/batches", params={"name": batch}).json()
        if not found:
            raise GagarAPIError(404, [f"no batch named {batch!r}"])
        return found[0]["id"]

    def upload(self, path: str | Path, *, batch: str, pass_threshold: float | None = None,
               append: bool = False) -> dict:
        """Import a rollout file (.jsonl, .jsonl.gz, .jsonl.zst) into `batch`, whole or not at
        all; a bad line raises GagarAPIError(400) with `file:line: field: reason` errors. An
        existing `batch` is extended only with `append` (else GagarAPIError(400))."""
        path = Path(path)
        params: dict[str, Any] = {"name": batch, "filename": path.name}
        if pass_threshold is not None:
            params["pass_threshold"] = pass_threshold
        if append:
            params["append"] = "true"
        return self._request("POST", "/batches", params=params, body=path,
                             headers=_body_headers(ENCODINGS.get(path.suffix))).json()

    def status(self, batch: str) -> dict:
        """Groups by label, trajectories, gradings per state and the latest grading runs."""
        return self._request("GET", f"/batches/{self.batch_id(batch)}").json()

    def grade(self, batch: str, *, grader: str = "heuristic", regrade: bool = False) -> dict:
        """Queue the batch's mixed groups for grading by the profile `grader`."""
        return self._request("POST", f"/batches/{self.batch_id(batch)}/gradings",
                             json={"grader": grader, "regrade": regrade}).json()

    def wait_for_advantages(self, batch: str, *, timeout: float, format: str = "jsonl") -> list[dict] | bytes:
        """The batch's advantages once no grading of it is queued or running: JSONL as a list
        of rows (dicts), Parquet as the file's bytes. GagarError after `timeout` seconds."""
        batch_pk = self.batch_id(batch)
        end = time.monotonic() + timeout
        while True:
            wait = _clamp(end - time.monotonic())
            response = self._request("GET", f"/batches/{batch_pk}/advantages",
                                     params={"format": format, "wait": wait}, wait=wait)
            if response.status_code == 200:
                if format == "jsonl":
                    return [json.loads(line) for line in response.text.splitlines() if line]
                return response.content
            if time.monotonic() >= end:
                raise GagarError(f"grading of {batch!r} not done after {timeout:g} s: {response.json()['gradings']}")

    # --- exports ---------------------------------------------------------------------

    def export(self, batch: str, *, kind: str = "advantages", format: str = "parquet",
               config: dict | None = None, allow_ungraded: bool = False) -> dict:
        """Start an export of `batch` built by a worker; poll it with `export_status`. While
        grading of the batch runs the app refuses an advantages export unless `allow_ungraded`."""
        return self._request("POST", f"/batches/{self.batch_id(batch)}/exports",
                             json={"kind": kind, "format": format, "config": config or {},
                                   "allow_ungraded": allow_ungraded}).json()

    def export_status(self, export_id: int, *, wait: float = 0) -> dict:
        """An export's state and files, after waiting up to `wait` seconds for it to finish."""
        wait = _clamp(wait)
        return self._request("GET", f"/exports/{export_id}", params={"wait": wait}, wait=wait).json()

    def download(self, export_id: int, name: str, path: str | Path) -> Path:
        """Write the export's file `name` (see `export_status(...)["files"]`) to `path`."""
        path = Path(path)
        response = self._request("GET", f"/exports/{export_id}/files/{quote(name, safe='')}", stream=True)
        try:
            with path.open("wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
        except httpx.TransportError as error:
            raise GagarError(f"download of {name!r} broke off: {error}") from None
        finally:
            response.close()
        return path

    # --- online steps ----------------------------------------------------------------

    def latest_step(self, run: str) -> int | None:
        """The number of the latest step of the run `run` in the app; None when it has none yet."""
        found = self._request("GET", "/runs", params={"name": run}).json()
        return found[0]["latest_step"] if found else None

    def grade_step(self, rollouts: Sequence[dict], *, run: str, step: int, grader: str = "heuristic",
                   deadline: float = 60.0, advantage_config: dict | None = None, append: bool = False) -> StepResult:
        """Grade one training step's groups and return a reward for every trajectory.

        `rollouts` are rollout-format records (group_id, trajectory_id, reward, patch, ...).
        Groups not ranked within `deadline` seconds, or whose grading failed or was cancelled,
        get their plain GRPO advantage and are named in `fallback`. If the app cannot be
        reached (or fails with a 5xx) before the deadline, every trajectory gets the plain GRPO
        advantage of its test reward under `advantage_config`, computed here, and every group is
        in `fallback`: training never waits on the app. A 4xx answer (a bad rollout, a bad
        token, a step the run has or has passed: 409 unless `append`) raises GagarAPIError:
        that is a mistake to fix, not to ride out.
        Returns by `deadline` plus at most one request timeout."""
        end = time.monotonic() + deadline
        keys = [_key(r) for r in rollouts]
        body = b"".join(json.dumps(r).encode() + b"\n" for r in rollouts)
        params: dict[str, Any] = {"run": run, "step": step, "grader": grader}
        if append:
            params["append"] = "true"
        if advantage_config:
            params["config"] = json.dumps(advantage_config)
        try:
            submitted = self._request("POST", "/steps", params=params, body=body, until=end,
                                      headers=_body_headers(None)).json()
            while True:
                wait = _clamp(end - time.monotonic())
                answer = self._request("GET", f"/steps/{submitted['batch_id']}", params={"wait": wait},
                                       wait=wait, until=end).json()
                if answer["complete"] or time.monotonic() >= end:
                    break
        except GagarAPIError as error:
            if error.status < 500:
                raise
            return _plain(rollouts, keys, f"app error: {error}", advantage_config)
        except GagarError as error:
            return _plain(rollouts, keys, f"app unreachable: {error}", advantage_config)
        return _step_result(answer, keys, deadline)

    # --- transport -------------------------------------------------------------------

    def _request(self, method: str, path: str, *, body: Path | bytes | None = None, wait: float = 0,
                 until: float | None = None, stream: bool = False, **options) -> httpx.Response:
        """The app's answer to one call; with `stream` its body is left to read (and close).

        Retried on connection errors and 502/503/504 with exponential backoff, never past
        `until` (a time.monotonic() deadline). GagarAPIError for an error answer, GagarError
        when the app cannot be reached. `wait`: seconds the app may hold the call, added
        to the read timeout."""
        timeout = httpx.Timeout(self.timeout, read=self.timeout + wait)
        attempt = 0
        while True:
            try:
                with _content(body) as content:
                    request = self._http.build_request(method, path, content=content, timeout=timeout, **options)
                    response = self._http.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                problem: GagarError = GagarError(f"cannot connect to {self.url}: {error}")
            except httpx.TimeoutException as error:
                raise GagarError(f"{method} {path}: no answer within the timeout ({error})") from None
            except httpx.TransportError as error:
                raise GagarError(f"{method} {path}: {error}") from None
            else:
                if response.status_code not in RETRY_STATUSES:
                    if response.is_error:
                        response.read()
                        response.close()
                        raise GagarAPIError(response.status_code, _errors(response))
                    return response
                response.close()
                problem = GagarAPIError(response.status_code, [response.reason_phrase])
            delay = self.backoff * 2 ** attempt
            if attempt == self.retries or (until is not None and time.monotonic() + delay >= until):
                raise problem
            time.sleep(delay)
            attempt += 1


def _body_headers(encoding: str | None) -> dict[str, str]:
    # httpx sends the length of a file or bytes up front, as the app needs: never chunked.
    headers = {"Content-Type": "application/x-ndjson"}
    if encoding:
        headers["Content-Encoding"] = encoding
    return headers


@contextmanager
def _content(body: Path | bytes | None):
    """The request body for one attempt: a file is opened afresh, so a retry sends it whole."""
    if isinstance(body, Path):
        with body.open("rb") as handle:
            yield handle
    else:
        yield body


def _errors(response: httpx.Response) -> list[str]:
    try:
        errors = response.json()["errors"]
    except (ValueError, KeyError, TypeError):
        return [response.text[:500] or response.reason_phrase]
    return [str(e) for e in errors]


def _clamp(seconds: float) -> float:
    return round(min(max(seconds, 0.0), MAX_WAIT_S), 3)


def _key(rollout: dict) -> tuple[str, str]:
    try:
        return str(rollout["group_id"]), str(rollout["trajectory_id"])
    except (KeyError, TypeError):
        raise ValueError(f"a rollout needs group_id and trajectory_id: {str(rollout)[:200]}") from None


def _plain(rollouts: Sequence[dict], keys: list[tuple[str, str]], reason: str, config: dict | None) -> StepResult:
    """Plain GRPO advantages of the test rewards, as the app would give them under `config`,
    every group a fallback: what a trainer gets without the app."""
    values = grpo_values([float(r["reward"]) for r in rollouts], keys, config)
    return StepResult(batch="", rewards=dict(zip(keys, values, strict=True)),
                      fallback={group: reason for group, _ in keys})


def _step_result(answer: dict, keys: list[tuple[str, str]], deadline: float) -> StepResult:
    rows = {(row["group_id"], row["trajectory_id"]): row for row in answer["trajectories"]}
    fallback = {}
    for group in answer["groups"]:
        if group["state"] == "pending":
            fallback[group["group_id"]] = f"timeout: not graded within {deadline:g} s"
        elif group["state"] in ("failed", "cancelled"):  # the app's reason says which
            fallback[group["group_id"]] = group["reason"]
    missing = [key for key in keys if key not in rows]
    if missing:
        raise GagarError(f"the app's answer lacks {len(missing)} submitted trajectories, e.g. {missing[0]}")
    rewards = {key: rows[key]["grpo_advantage" if key[0] in fallback else "reward_for_trainer"] for key in keys}
    return StepResult(batch=answer["batch"], rewards=rewards, fallback=fallback)
