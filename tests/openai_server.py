"""A small OpenAI-compatible chat server over the transformers backend, for tests.

`transformers serve` ignores `response_format` (it reads no grammar), so it cannot exercise the
grader's schema-constrained `openai` backend. This server honours
`response_format={"type": "json_schema", "json_schema": {"schema": ...}}` by running
the transformers backend with that schema, and answers in the chat.completions shape
with token usage. It serves 127.0.0.1 only and is not meant for anything else.

    python tests/openai_server.py MODEL_DIR [--port 0]   # prints the base URL

`fail_first=N` answers the first N requests with HTTP 503, to test retries.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from grading.backends import Backend, Sampling, load_backend
from grading.cases import GraderError


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": self.server.backend.model_id, "object": "model"}]})
        else:
            self._send(404, _error(f"no route {self.path}"))

    def do_POST(self):
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, _error(f"no route {self.path}"))
            return
        with self.server.lock:
            self.server.requests += 1
            failing = self.server.requests <= self.server.fail_first
        if failing:
            self._send(503, _error("warming up, try again"))
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            messages, schema, sampling = _parse(request)
        except (ValueError, KeyError, TypeError) as error:
            self._send(400, _error(f"bad request: {error}"))
            return
        reply = self.server.backend.generate([messages], [schema], sampling)[0]
        if isinstance(reply, GraderError):
            self._send(400 if reply.permanent else 500, _error(str(reply)))
            return
        self._send(200, {
            "id": f"chatcmpl-{self.server.requests}", "object": "chat.completion",
            "created": int(time.time()), "model": self.server.backend.model_id,
            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                         "message": {"role": "assistant", "content": reply.text}}],
            "usage": {"prompt_tokens": reply.prompt_tokens,
                      "completion_tokens": reply.completion_tokens,
                      "total_tokens": reply.prompt_tokens + reply.completion_tokens},
        })

    def _send(self, status: int, payload: dict):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, backend: Backend, fail_first: int):
        super().__init__(address, _Handler)
        self.backend = backend
        self.fail_first = fail_first
        self.requests = 0
        self.lock = threading.Lock()


def _parse(request: dict):
    messages = request["messages"]
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise ValueError("messages must be a list of {role, content} with text content")
    response_format = request.get("response_format") or {}
    if response_format.get("type") != "json_schema":
        raise ValueError("this server only serves response_format json_schema")
    schema = response_format["json_schema"]["schema"]
    sampling = Sampling(temperature=float(request.get("temperature") or 0.0),
                        top_p=float(request.get("top_p") or 1.0),
                        max_new_tokens=int(request.get("max_tokens") or 512),
                        seed=int(request.get("seed") or 0))
    return messages, schema, sampling


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def serve(backend: Backend, *, host: str = "127.0.0.1", port: int = 0, fail_first: int = 0):
    """Start serving in a daemon thread; returns (server, thread). Port 0 picks a free one."""
    server = _Server((host, port), backend, fail_first)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a local model folder (e.g. from build_tiny_model)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server, thread = serve(load_backend("transformers", model=args.model), port=args.port)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
