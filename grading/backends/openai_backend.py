"""Any OpenAI-compatible chat endpoint (`vllm serve`, a hosted API, tests/openai_server.py).

Each conversation is one POST to `{url}/chat/completions` with
`response_format={"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`;
the batch goes out concurrently on a thread pool (the server batches them). Errors are
typed: a 4xx (other than 408/409/425/429) is permanent, since the same request will be
refused again; timeouts, 5xx, 429 and connection failures are transient and retried
with exponential backoff before they are returned. Only the standard library is used.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from grading.backends import Backend, Conversation, Reply, Sampling, per_conversation
from grading.cases import GraderError

RETRYABLE_4XX = frozenset({408, 409, 425, 429})


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, url: str, *, model: str, api_key_env: str | None = None,
                 timeout_s: float = 120.0, retries: int = 2, backoff_s: float = 0.5,
                 concurrency: int = 32, model_id: str | None = None):
        self.url = url.rstrip("/")
        self.model = model
        self.model_id = model_id or model.rstrip("/").rsplit("/", 1)[-1]
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self._api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        # The grading endpoint is addressed directly; a proxy in the environment is not for it.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def generate(self, conversations: Sequence[Conversation],
                 schemas: Mapping | Sequence[Mapping],
                 sampling: Sampling) -> list[Reply | GraderError]:
        schemas = per_conversation(schemas, len(conversations))
        if not conversations:
            return []
        workers = max(1, min(self.concurrency, len(conversations)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda c, s: self._complete(c, s, sampling),
                                 conversations, schemas))

    def _complete(self, conversation: Conversation, schema: Mapping,
                  sampling: Sampling) -> Reply | GraderError:
        body = {
            "model": self.model,
            "messages": [dict(m) for m in conversation],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "seed": sampling.seed,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "grader_action", "schema": dict(schema), "strict": True}},
        }
        for attempt in range(self.retries + 1):
            try:
                return _reply(self._post(body))
            except GraderError as error:
                if error.permanent or attempt == self.retries:
                    return error
                time.sleep(self.backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")

    def _post(self, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(f"{self.url}/chat/completions",
                                         data=json.dumps(body).encode(), headers=headers)
        where = f"{self.url}/chat/completions"
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            detail = error.read(300).decode("utf-8", "replace").strip()
            permanent = 400 <= error.code < 500 and error.code not in RETRYABLE_4XX
            raise GraderError(f"{where}: HTTP {error.code}: {detail}", permanent=permanent) \
                from error
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            raise GraderError(f"{where}: {type(error).__name__}: {reason}", permanent=False) \
                from error
        except ValueError as error:
            raise GraderError(f"{where}: response is not JSON: {error}", permanent=False) \
                from error


def _reply(payload: dict) -> Reply:
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"] or ""
    except (KeyError, IndexError, TypeError) as error:
        raise GraderError(f"response has no message content: {str(payload)[:200]}",
                          permanent=True) from error
    usage = payload.get("usage") or {}
    return Reply(text=text, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                 completion_tokens=int(usage.get("completion_tokens") or 0),
                 finish_reason=choice.get("finish_reason") or "stop")
