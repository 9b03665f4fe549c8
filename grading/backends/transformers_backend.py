"""In-process generation with transformers, on CPU or GPU, schema-constrained by xgrammar.

Prompts are left-padded into one batch and prefilled row by row into a static KV cache,
each from the longest prefix kept from earlier calls; `transformers_decode.decode` then
decodes the batch in place, one forward per token, each row constrained by its own
compiled grammar, the mask applied before temperature/top-p (as transformers' `generate`
orders its processors), so sampling never picks a token the schema forbids. torch,
transformers and xgrammar are imported when a backend is built.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from grading.backends import (
    Backend,
    Conversation,
    Reply,
    Sampling,
    local_model_path,
    per_conversation,
)
from grading.backends.transformers_decode import decode, register_attention
from grading.cases import GraderError


class TransformersBackend(Backend):
    name = "transformers"
    cacheable = True

    def __init__(self, model: str, *, device: str = "cpu", dtype: str = "auto",
                 max_batch: int = 64, model_id: str | None = None, threads: int | None = None,
                 prefix_cache_tokens: int = 262144):
        path = local_model_path(model)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        loaded = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        self._setup(loaded.to(device), tokenizer, model_id or path.name, max_batch,
                    prefix_cache_tokens)

    @classmethod
    def from_loaded(cls, model, tokenizer, *, model_id: str, max_batch: int = 64,
                    prefix_cache_tokens: int = 262144):
        """A backend over a model already in memory (benchmarks build one on the device)."""
        backend = cls.__new__(cls)
        backend._setup(model, tokenizer, model_id, max_batch, prefix_cache_tokens)
        return backend

    def _setup(self, model, tokenizer, model_id: str, max_batch: int,
               prefix_cache_tokens: int) -> None:
        import xgrammar

        if model.config._attn_implementation == "sdpa":
            model.set_attn_implementation(register_attention())
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.stop_ids = sorted({*eos, tokenizer.eos_token_id} - {None})
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.max_batch = max_batch
        self.max_context = getattr(model.config, "max_position_embeddings", None)
        info = xgrammar.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=model.config.vocab_size, stop_token_ids=self.stop_ids)
        self._compiler = xgrammar.GrammarCompiler(info)
        self._filler = xgrammar.BatchGrammarMatcher()
        self._grammars: dict[str, object] = {}
        self._prefixes = _PrefixStore(prefix_cache_tokens)
        self._lock = threading.Lock()

    def reset_prefix_cache(self) -> None:
        """Forget every kept prompt prefix (as vLLM's `LLM.reset_prefix_cache`): benchmarks
        start each measured run cold."""
        with self._lock:
            self._prefixes = _PrefixStore(self._prefixes.max_tokens)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, conversations: Sequence[Conversation],
                 schemas: Mapping | Sequence[Mapping],
                 sampling: Sampling) -> list[Reply | GraderError]:
        schemas = per_conversation(schemas, len(conversations))
        texts = [self.tokenizer.apply_chat_template(list(c), tokenize=False,
                                                    add_generation_prompt=True)
                 for c in conversations]
        results: list[Reply | GraderError | None] = [None] * len(texts)
        prompts = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        lengths = [len(ids) for ids in prompts]
        limit = self.max_context or float("inf")
        for i, length in enumerate(lengths):
            if length + sampling.max_new_tokens > limit:
                results[i] = GraderError(
                    f"context of {length} tokens plus {sampling.max_new_tokens} new exceeds "
                    f"the model's {limit}", permanent=True)
        # Similar lengths share a batch, so left padding wastes little.
        order = sorted((i for i in range(len(texts)) if results[i] is None),
                       key=lambda i: lengths[i])
        with self._lock:
            for start in range(0, len(order), self.max_batch):
                chunk = order[start:start + self.max_batch]
                try:
                    replies = self._generate([prompts[i] for i in chunk],
                                             [self._grammar(schemas[i]) for i in chunk], sampling)
                except Exception as error:  # noqa: BLE001 - one bad batch must not stop the rest
                    replies = [_error(error)] * len(chunk)
                for i, reply in zip(chunk, replies, strict=True):
                    results[i] = reply
        return results

    def _grammar(self, schema: Mapping):
        key = json.dumps(schema)  # not sorted: property order is the order the model writes
        if key not in self._grammars:
            self._grammars[key] = self._compiler.compile_json_schema(key, any_whitespace=False)
        return self._grammars[key]

    def _generate(self, prompts: list[list[int]], grammars: list, sampling: Sampling) -> list:
        import torch

        batch = self.tokenizer.pad({"input_ids": prompts}, padding=True,
                                   return_tensors="pt").to(self.model.device)
        prompt_tokens = [len(ids) for ids in prompts]
        width = batch["input_ids"].shape[1]
        cache = self._prefill(batch["input_ids"], prompt_tokens, width + sampling.max_new_tokens)
        torch.manual_seed(sampling.seed)
        with torch.inference_mode():
            rows = decode(self.model, cache, batch["input_ids"][:, -1], prompt_tokens, width,
                          grammars, sampling, self.stop_ids, self._filler)
        replies = []
        for row, n_prompt in zip(rows, prompt_tokens, strict=True):
            stopped = bool(row) and row[-1] in self.stop_ids
            replies.append(Reply(
                text=self.tokenizer.decode(row[:-1] if stopped else row, skip_special_tokens=True),
                prompt_tokens=n_prompt,
                completion_tokens=len(row),
                finish_reason="stop" if stopped else "length",
            ))
        return replies

    def _prefill(self, input_ids, lengths: list[int], max_length: int):
        """A static KV cache holding every prompt but its last token, left-padded.

        Rows are computed one at a time: a padded batch prefill pays batch x length^2 for
        its attention mask (32 prompts of ~7k tokens: 52 s padded, 1.6 s row by row). Each
        row starts from the longest token prefix already in the prefix store (the shared
        system prompt, or the same conversation's previous turn), so a turn only computes
        what is new. `decode` then feeds the last prompt tokens together and decodes the
        batch in place (a static cache: no copy of the whole cache per token).
        """
        import torch
        from torch.nn.functional import pad
        from transformers import DynamicCache, StaticCache

        width = input_ids.shape[1]
        rows = []
        with torch.inference_mode():
            for row, length in zip(input_ids, lengths, strict=True):
                prompt = row[width - length:-1]
                reused, layers = self._prefixes.longest(prompt)
                if reused < len(prompt):
                    past = DynamicCache(ddp_cache_data=[(k[:, :, :reused], v[:, :, :reused])
                                                        for k, v in layers]) if reused else None
                    cache = self.model(input_ids=prompt[reused:].unsqueeze(0), cache=past,
                                       use_cache=True, logits_to_keep=1).cache
                    layers = [(layer.keys, layer.values) for layer in cache.layers]
                    self._prefixes.put(prompt, layers)
                rows.append([(pad(k[:, :, :len(prompt)], (0, 0, width - length, 0)),
                              pad(v[:, :, :len(prompt)], (0, 0, width - length, 0)))
                             for k, v in layers])
            static = StaticCache(config=self.model.config, max_cache_len=max_length)
            for i, layer in enumerate(static.layers):
                layer.update(torch.cat([r[i][0] for r in rows]), torch.cat([r[i][1] for r in rows]))
        return static


class _PrefixStore:
    """Per-prompt KV caches of recent turns, looked up by longest shared token prefix.

    Bounded by `max_tokens` cached positions, least recently used out first; an entry that
    a longer prompt extends (the same conversation one turn later) is dropped at once.
    """

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.entries: OrderedDict[int, tuple] = OrderedDict()
        self.tokens = 0
        self._next = 0

    def longest(self, ids) -> tuple[int, list]:
        best, best_key = 0, None
        for key, (stored, _) in self.entries.items():
            n = min(len(stored), len(ids))
            if n <= best:
                continue
            differ = (stored[:n] != ids[:n]).nonzero()
            shared = int(differ[0]) if len(differ) else n
            if shared > best:
                best, best_key = shared, key
        if best_key is None:
            return 0, []
        self.entries.move_to_end(best_key)
        return best, self.entries[best_key][1]

    def put(self, ids, layers) -> None:
        if self.max_tokens <= 0:
            return
        for key, (stored, _) in list(self.entries.items()):
            if len(stored) <= len(ids) and bool((ids[:len(stored)] == stored).all()):
                self._drop(key)
        self.entries[self._next] = (ids.clone(), layers)
        self.tokens += len(ids)
        self._next += 1
        while self.tokens > self.max_tokens and len(self.entries) > 1:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: int) -> None:
        stored, _ = self.entries.pop(key)
        self.tokens -= len(stored)


def _error(error: Exception) -> GraderError:
    if isinstance(error, GraderError):
        return error
    # Out of memory can pass once the batch is smaller or the device is free; the rest is a bug.
    transient = "out of memory" in str(error).lower()
    return GraderError(f"transformers generate failed: {type(error).__name__}: {error}",
                       permanent=not transient)
