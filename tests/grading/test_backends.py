"""Grader backends: the registry, transformers in-process, OpenAI-compatible HTTP, vllm (lazily)."""

import importlib.util
import json
import socket
import subprocess
import sys

import pytest

from grading.backends import BACKENDS, Reply, Sampling, load_backend
from grading.cases import Grade, GraderError
from grading.graders.agentic import AgenticGrader, Budget, schema_errors
from grading.tool_limits import Caps
from tests.grading import agentic_fixtures as fx
from tests.grading.agentic_fixtures import make_group
from tests.openai_server import serve

tiny_model, tiny_backend, openai_url = fx.tiny_model, fx.tiny_backend, fx.openai_url

CHOICE = {"type": "object", "properties": {"pick": {"enum": ["left", "right"]}},
          "required": ["pick"], "additionalProperties": False}
WORDS = {"type": "object", "properties": {
    "n": {"type": "integer", "minimum": 0, "maximum": 99},
    "words": {"type": "array", "maxItems": 3, "items": {"type": "string", "pattern": "^[a-z]{1,6}$"}}},
    "required": ["n", "words"], "additionalProperties": False}
CONVERSATION = [{"role": "system", "content": "Answer in JSON."},
                {"role": "user", "content": "Pick one."}]
SAMPLED = Sampling(temperature=1.0, max_new_tokens=64, seed=1)


def test_backends_are_registered_by_dotted_path():
    assert BACKENDS == {
        "transformers": "grading.backends.transformers_backend:TransformersBackend",
        "openai": "grading.backends.openai_backend:OpenAIBackend",
        "vllm": "grading.backends.vllm_backend:VLLMBackend",
    }
    with pytest.raises(GraderError, match="unknown backend 'tgi'") as error:
        load_backend("tgi")
    assert error.value.permanent


def test_importing_grading_imports_no_model_library():
    code = (
        "import sys, grading, grading.backends, grading.backends.vllm_backend, "
        "grading.backends.transformers_backend, grading.backends.openai_backend, "
        "grading.graders.agentic, grading.workspace, grading.profiles, grading.tiny_model\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'vllm', 'torch', 'transformers', 'xgrammar', 'tokenizers'})\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_vllm_loads_lazily_and_says_what_is_missing(tmp_path):
    with pytest.raises(GraderError, match="cannot load backend 'vllm'.*vllm") as error:
        load_backend("vllm", model=str(tmp_path))
    assert error.value.permanent


def test_models_load_from_local_folders_only(tmp_path):
    with pytest.raises(GraderError, match="model folder not found: org/grader-7b") as error:
        load_backend("transformers", model="org/grader-7b")
    assert error.value.permanent


def test_a_loaded_backend_is_kept_per_model_and_options(tiny_backend, tiny_model):
    assert load_backend("transformers", model=str(tiny_model), threads=1) is tiny_backend
    assert tiny_backend.model_id == "tiny-model"


def test_transformers_constrains_each_conversation_by_its_own_schema(tiny_backend):
    schemas = [CHOICE, WORDS] * 4
    replies = tiny_backend.generate([CONVERSATION] * 8, schemas, SAMPLED)
    for reply, schema in zip(replies, schemas, strict=True):
        assert isinstance(reply, Reply) and reply.finish_reason == "stop"
        assert schema_errors(json.loads(reply.text), schema) == []
        assert reply.prompt_tokens > 10 and 0 < reply.completion_tokens <= 64


def test_a_reply_cut_by_max_new_tokens_says_length(tiny_backend):
    reply, = tiny_backend.generate([CONVERSATION], WORDS, Sampling(max_new_tokens=3))
    assert reply.finish_reason == "length" and reply.completion_tokens == 3


def test_openai_backend_over_http_honours_the_schema(openai_url):
    backend = load_backend("openai", url=openai_url, model="tiny-model")
    replies = backend.generate([CONVERSATION] * 4, [CHOICE, WORDS, CHOICE, WORDS], SAMPLED)
    for reply, schema in zip(replies, [CHOICE, WORDS] * 2, strict=True):
        assert schema_errors(json.loads(reply.text), schema) == []
        assert reply.prompt_tokens > 10 and reply.completion_tokens > 0


def test_the_agentic_loop_runs_over_http(openai_url):
    backend = load_backend("openai", url=openai_url, model="tiny-model", concurrency=4)
    grader = AgenticGrader(backend, sampling=Sampling(temperature=1.0, seed=2),
                           caps=Caps(output_chars=500), budget=Budget(max_turns=2,
                                                                      rationale_chars=16))
    results = grader.rank_many([make_group("a"), make_group("b", passed=(True, True, True))])
    assert all(isinstance(r, Grade) for r in results)
    assert results[0].version.startswith("tiny-model:")
    assert results[1].usage["prompt_tokens"] > 0


def record_requests(backend) -> list[float]:
    """Wrap the backend's HTTP opener; the list collects the timeout of each request sent."""
    timeouts, send = [], backend._opener.open

    def recording(request, *, timeout):
        timeouts.append(timeout)
        return send(request, timeout=timeout)

    backend._opener.open = recording
    return timeouts


def test_a_4xx_is_permanent_and_not_retried(openai_url):
    backend = load_backend("openai", url=openai_url.replace("/v1", "/v2"), model="m",
                           retries=3, backoff_s=0.01)
    sent = record_requests(backend)
    error, = backend.generate([CONVERSATION], CHOICE, SAMPLED)
    assert isinstance(error, GraderError) and error.permanent
    assert "HTTP 404" in str(error) and len(sent) == 1


def test_a_schema_the_server_cannot_compile_is_a_permanent_400(openai_url):
    backend = load_backend("openai", url=openai_url, model="m", retries=0)
    bad = {"type": "object", "properties": {"x": {"type": "strnig"}}, "required": ["x"]}
    error, = backend.generate([CONVERSATION], bad, SAMPLED)
    assert error.permanent and "HTTP 400" in str(error)


def test_a_5xx_is_retried_then_succeeds(tiny_backend):
    server, thread = serve(tiny_backend, fail_first=2)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        backend = load_backend("openai", url=url, model="m", retries=2, backoff_s=0.01)
        reply, = backend.generate([CONVERSATION], CHOICE, SAMPLED)
        assert isinstance(reply, Reply) and server.requests == 3
        server.requests, server.fail_first = 0, 5
        error, = load_backend("openai", url=url, model="m", retries=1,
                              backoff_s=0.01).generate([CONVERSATION], CHOICE, SAMPLED)
        assert not error.permanent and "HTTP 503" in str(error)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_connection_refused_is_transient():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = load_backend("openai", url=f"http://127.0.0.1:{port}/v1", model="m", retries=0)
    error, = backend.generate([CONVERSATION], CHOICE, SAMPLED)
    assert isinstance(error, GraderError) and not error.permanent
    assert "refused" in str(error).lower()


def test_a_server_that_never_answers_times_out_as_transient():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        backend = load_backend("openai", url=url, model="m", timeout_s=0.3, retries=1,
                               backoff_s=0.01)
        sent = record_requests(backend)
        error, = backend.generate([CONVERSATION], CHOICE, SAMPLED)
    assert isinstance(error, GraderError) and not error.permanent
    assert "timed out" in str(error)
    assert sent == [0.3, 0.3]  # the first try and one retry, each bounded by timeout_s


def test_a_batch_decodes_as_each_conversation_would_alone(tiny_backend):
    """Row-by-row prefill, the prefix store and left padding change no greedy token."""
    conversations = [[*CONVERSATION, {"role": "user", "content": "more " * (7 * i)}]
                     for i in range(5)]
    greedy = Sampling(max_new_tokens=40)
    alone = [tiny_backend.generate([c], WORDS, greedy)[0].text for c in conversations]
    together = [r.text for r in tiny_backend.generate(conversations, WORDS, greedy)]
    assert together == alone


def test_the_prefix_store_finds_the_longest_shared_prefix_and_stays_bounded():
    torch = pytest.importorskip("torch")
    from grading.backends.transformers_backend import _PrefixStore

    store = _PrefixStore(max_tokens=10)
    store.put(torch.tensor([1, 2, 3, 4]), ["abcd"])
    store.put(torch.tensor([1, 2, 9]), ["ab9"])
    assert store.longest(torch.tensor([1, 2, 3, 4, 5])) == (4, ["abcd"])
    assert store.longest(torch.tensor([1, 2, 9, 9])) == (3, ["ab9"])
    assert store.longest(torch.tensor([7])) == (0, [])
    store.put(torch.tensor([1, 2, 3, 4, 5, 6]), ["abcdef"])  # the next turn replaces [1,2,3,4]
    assert store.tokens == 9 and len(store.entries) == 2
    store.put(torch.tensor([8, 8, 8]), ["888"])  # over 10 tokens: the least recent goes
    assert store.tokens <= 10 and store.longest(torch.tensor([1, 2, 9]))[0] == 2

