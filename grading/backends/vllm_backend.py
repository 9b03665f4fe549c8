"""In-process vLLM for GPU workers: one engine per (model, options), kept loaded across tasks.

API as documented for vLLM >= 0.12 (the `guided_*` fields were removed then):
https://docs.vllm.ai/en/latest/features/structured_outputs/ ("Offline Inference"):
`SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))` from
`vllm.sampling_params`, and `LLM.chat(messages=[conversation, ...],
sampling_params=[params, ...], use_tqdm=False)` (vllm/entrypoints/llm.py: one
SamplingParams per prompt is accepted). Prefix caching is on, so the long shared
system prompt and each conversation's earlier turns are computed once. vllm is
imported only when a backend is built; it lives in the `gpu` extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grading.backends import (
    Backend,
    Conversation,
    Reply,
    Sampling,
    local_model_path,
    per_conversation,
)
from grading.cases import GraderError


class VLLMBackend(Backend):
    name = "vllm"
    cacheable = True

    def __init__(self, model: str, *, model_id: str | None = None, dtype: str = "auto",
                 gpu_memory_utilization: float = 0.85, max_model_len: int | None = None,
                 seed: int = 0, **engine_options):
        from vllm import LLM

        path = local_model_path(model)
        self.model_id = model_id or path.name
        self.llm = LLM(model=str(path), dtype=dtype, seed=seed,
                       gpu_memory_utilization=gpu_memory_utilization,
                       max_model_len=max_model_len, enable_prefix_caching=True,
                       **engine_options)
        self.max_context = self.llm.llm_engine.model_config.max_model_len
        self._tokenizer = self.llm.get_tokenizer()

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def generate(self, conversations: Sequence[Conversation],
                 schemas: Mapping | Sequence[Mapping],
                 sampling: Sampling) -> list[Reply | GraderError]:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        schemas = per_conversation(schemas, len(conversations))
        params = [
            SamplingParams(
                temperature=sampling.temperature, top_p=sampling.top_p,
                max_tokens=sampling.max_new_tokens, seed=sampling.seed,
                structured_outputs=StructuredOutputsParams(json=dict(schema),
                                                           disable_any_whitespace=True),
            )
            for schema in schemas
        ]
        try:
            outputs = self.llm.chat([list(map(dict, c)) for c in conversations],
                                    sampling_params=params, use_tqdm=False)
        except Exception as error:  # noqa: BLE001 - the batch fails as a whole, typed
            failure = GraderError(f"vllm chat failed: {type(error).__name__}: {error}",
                                  permanent=False)
            return [failure] * len(conversations)
        replies: list[Reply | GraderError] = []
        for output in outputs:
            completion = output.outputs[0]
            replies.append(Reply(
                text=completion.text,
                prompt_tokens=len(output.prompt_token_ids or ()),
                completion_tokens=len(completion.token_ids),
                finish_reason=completion.finish_reason or "stop",
            ))
        return replies
