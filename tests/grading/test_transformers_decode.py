"""The transformers backend's decode loop: no host read per step, one graph, transformers' tokens."""

import json
from collections import Counter

import pytest

from grading.backends import Sampling
from tests.grading import agentic_fixtures as fx

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

tiny_model, tiny_backend = fx.tiny_model, fx.tiny_backend

CHOICE = {"type": "object", "properties": {"pick": {"enum": ["left", "right"]}},
          "required": ["pick"], "additionalProperties": False}
WORDS = {"type": "object", "properties": {
    "n": {"type": "integer", "minimum": 0, "maximum": 99},
    "words": {"type": "array", "maxItems": 3, "items": {"type": "string", "pattern": "^[a-z]{1,6}$"}}},
    "required": ["n", "words"], "additionalProperties": False}
# 120 letters: no reply stops within the few tokens these tests decode.
LONG = {"type": "object", "properties": {"text": {"type": "string", "pattern": "^[a-z]{120}$"}},
        "required": ["text"], "additionalProperties": False}
# Ops whose result the host waits for: a scalar read, or an output sized by its values.
HOST_READS = {"_local_scalar_dense", "item", "is_nonzero", "equal", "nonzero", "masked_select",
              "_unique2", "unique_consecutive", "unique_dim", "repeat_interleave"}


def conversations(n: int, word: str = "more") -> list[list[dict]]:
    """`n` conversations, each longer than the one before (the backend batches by length)."""
    return [[{"role": "system", "content": "Answer in JSON."},
             {"role": "user", "content": f"{word} " * (1 + 6 * i)}] for i in range(n)]


class HostReads(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in HOST_READS:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def host_reads(backend, steps: int) -> Counter:
    backend.reset_prefix_cache()
    sampling = Sampling(temperature=0.8, top_p=0.9, max_new_tokens=steps, seed=4)
    with HostReads() as reads:
        replies = backend.generate(conversations(3), LONG, sampling)
    assert [r.completion_tokens for r in replies] == [steps] * 3
    return reads.ops


def test_a_decode_step_reads_nothing_back_from_the_device(tiny_backend):
    """Four steps or twenty, the same host reads: those of the prefill (the prefix store's
    lookups), once per call. The step's one read, the sampled tokens for the grammar
    matchers, is a copy to the host: on CPU no op at all, on a GPU one per step."""
    assert host_reads(tiny_backend, 4) == host_reads(tiny_backend, 20)


def test_one_graph_decodes_every_layer_and_step(tiny_backend):
    """torch.compile traces a decode step whole (no graph break, so no layer compiled on
    its own) and reuses that graph as the cache fills."""
    from torch._dynamo.testing import CompileCounter
    from transformers import StaticCache

    from grading.backends.transformers_decode import decode_step

    model, slots, prompt = tiny_backend.model, 12, 4
    counter = CompileCounter()
    step = torch.compile(decode_step, backend=counter, fullgraph=True, dynamic=True)
    cache = StaticCache(config=model.config, max_cache_len=slots)
    every_slot = torch.ones(3, 1, 1, slots, dtype=torch.bool)
    tokens = torch.tensor([5, 6, 7])
    with torch.inference_mode():
        # A prompt, then decoding; as in decode(), the mask is a view of part of its rows.
        for slot in range(slots - 1):
            forward = decode_step if slot < prompt else step
            logits = forward(model, cache, tokens, torch.full((3,), slot),
                             every_slot[..., :slot + 1])
    assert logits.shape == (3, model.config.vocab_size) and counter.frame_count == 1


def transformers_generate(backend, prompts: list, schemas: list, sampling: Sampling) -> list[str]:
    """The texts transformers' own `generate` writes for one padded batch: its SDPA over a
    dynamic cache, xgrammar's logits processor (one matcher filled at a time)."""
    import xgrammar
    from transformers import GenerationConfig
    from xgrammar.contrib.hf import LogitsProcessor

    model, tokenizer = backend.model, backend.tokenizer
    compiler = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo.from_huggingface(
        tokenizer, vocab_size=model.config.vocab_size, stop_token_ids=backend.stop_ids))
    grammars = [compiler.compile_json_schema(json.dumps(s), any_whitespace=False) for s in schemas]
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
             for p in prompts]
    batch = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    sample = sampling.temperature > 0
    config = GenerationConfig(
        max_new_tokens=sampling.max_new_tokens, do_sample=sample, eos_token_id=backend.stop_ids,
        pad_token_id=tokenizer.pad_token_id,
        **({"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
           if sample else {}))
    attention = model.config._attn_implementation
    try:
        model.set_attn_implementation("sdpa")
        torch.manual_seed(sampling.seed)
        with torch.inference_mode():
            output = model.generate(**batch, generation_config=config,
                                    logits_processor=[LogitsProcessor(grammars)])
    finally:
        model.set_attn_implementation(attention)
    replies = []
    for row in output[:, batch["input_ids"].shape[1]:].tolist():
        stop = next((i for i, token in enumerate(row) if token in backend.stop_ids), len(row))
        replies.append(tokenizer.decode(row[:stop], skip_special_tokens=True))
    return replies


@pytest.mark.parametrize("sampling", [Sampling(max_new_tokens=40),
                                      Sampling(temperature=1.0, max_new_tokens=40, seed=1),
                                      Sampling(temperature=0.7, top_p=0.9, max_new_tokens=40,
                                               seed=3)],
                         ids=["greedy", "sampled", "top-p"])
def test_the_backend_writes_what_transformers_generate_writes(tiny_backend, sampling):
    """Same seed, same tokens: the decode loop (used cache slots only, grouped queries, the
    grammar masks filled together) changes no result of transformers' `generate`."""
    prompts, schemas = conversations(6, "look"), [WORDS, CHOICE] * 3
    tiny_backend.reset_prefix_cache()
    ours = [r.text for r in tiny_backend.generate(prompts, schemas, sampling)]
    assert ours == transformers_generate(tiny_backend, prompts, schemas, sampling)
    assert all(ours)
