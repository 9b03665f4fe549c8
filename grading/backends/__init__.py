"""Generation backends for the agentic grader: one interface, one module each.

A backend turns a batch of chat conversations into one reply each, every reply
constrained by that conversation's JSON schema. Backends are registered by dotted
path and imported only when loaded, so `import grading` needs neither torch, vllm
nor an HTTP client. In-process backends that hold a model (`cacheable = True`) are
kept per (backend, options) for the life of the process: a GPU worker loads the
model once and grades many tasks with it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from grading.cases import GraderError
from grading.loading import ImportFailed, LoadError, load_object

BACKENDS = {
    "transformers": "grading.backends.transformers_backend:TransformersBackend",
    "openai": "grading.backends.openai_backend:OpenAIBackend",
    "vllm": "grading.backends.vllm_backend:VLLMBackend",
}

Conversation = Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class Sampling:
    """How to sample one action. `max_new_tokens` None: the grader's bound for the schema."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int | None = None
    seed: int = 0

    def __post_init__(self):
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")

    def describe(self) -> str:
        """Short and stable, for the grader version: 't0.7p0.95s1' (no max: the schema bounds it)."""
        return f"t{self.temperature:g}p{self.top_p:g}s{self.seed}"


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"  # "stop", or "length" when max_new_tokens cut it


class Backend:
    """Subclasses set `name` and `model_id` and implement `generate`; `max_context` is the
    most tokens (prompt plus reply) the model takes, when the backend knows it."""

    name: str = ""
    model_id: str = ""
    cacheable: bool = False
    max_context: int | None = None

    def count_tokens(self, text: str) -> int:
        """Tokens `text` takes; a conservative estimate unless the backend has the tokenizer."""
        return len(text) // 2 + 1

    def generate(self, conversations: Sequence[Conversation],
                 schemas: Mapping | Sequence[Mapping],
                 sampling: Sampling) -> list[Reply | GraderError]:
        """One reply per conversation, in order; a failed conversation gets a GraderError.

        `schemas` is one JSON schema for all, or one per conversation.
        `sampling.max_new_tokens` must be set by the caller.
        """
        raise NotImplementedError


_LOADED: dict[tuple[type, str], Backend] = {}
_LOCK = threading.Lock()


def load_backend(name: str, **options) -> Backend:
    """A backend by registered name or `module:Class` path, imported only now."""
    try:
        backend_class = load_object(name, BACKENDS, what="backend")
    except ImportFailed as error:
        raise _missing(str(error)) from error
    except LoadError as error:
        raise GraderError(str(error), permanent=True) from error
    if not getattr(backend_class, "cacheable", False):
        return _build(name, backend_class, options)
    key = (backend_class, json.dumps(options, sort_keys=True, default=str))
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = _build(name, backend_class, options)
        return _LOADED[key]


def _build(name: str, backend_class, options: dict) -> Backend:
    try:
        return backend_class(**options)
    except ImportError as error:  # backends import their libraries when built
        raise _missing(f"cannot load backend {name!r}: {error}") from error


def _missing(message: str) -> GraderError:
    return GraderError(f"{message} (extras: 'llm' installs transformers and xgrammar, "
                       "'gpu' installs vllm)", permanent=True)


def per_conversation(schemas: Mapping | Sequence[Mapping], n: int) -> list[Mapping]:
    if isinstance(schemas, Mapping):
        return [schemas] * n
    schemas = list(schemas)
    if len(schemas) != n:
        raise ValueError(f"{len(schemas)} schemas for {n} conversations")
    return schemas


def local_model_path(model: str | Path) -> Path:
    """Models load from local folders only: a hub id or a missing folder is a permanent error."""
    path = Path(model).expanduser()
    if not path.is_dir():
        raise GraderError(f"model folder not found: {model} (models load from local paths "
                          "only; nothing is downloaded)", permanent=True)
    return path
