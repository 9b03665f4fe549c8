"""A tiny random-weight chat model with its own tokenizer, built locally in about a second.

Tests, benchmarks and `manage.py make_tiny_model PATH` use it so that the grader's
real code paths (chat template, batched generation, schema-constrained decoding,
an OpenAI-compatible server) run with no download. Its output is nonsense by design.
Same seed, same files: the corpus, the tokenizer training and the weights are seeded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SPECIAL_TOKENS = ("<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
VOCAB_SIZE = 2048
CORPUS_LINES = 9000

_CODE_WORDS = tuple((
    "def return self import from class assert raise try except finally with as if elif else "
    "for while in not and or is None True False lambda yield pass break continue print len "
    "str int float dict list tuple set range open path file files test tests pytest fix bug "
    "error value values amount total parts result results args kwargs name names data key "
    "the a an of to is it that this be are was for on by with as at or if we you not can "
    "should would when then than so all each one two three no yes add remove change changed "
    "diff patch hunk line lines added removed passed failed turn turns assistant user tool "
    "call command output issue expected repository commit source code function method module"
).split())
_SYLLABLES = ("ka", "lo", "mi", "sen", "tor", "qu", "vex", "zu", "pri", "dal", "ong",
              "eth", "gra", "bi", "cul", "fy", "nor", "wix", "jas", "hep")
_TOOLS = ("list_trajectories", "view_patch", "view_transcript", "search", "compare",
          "view_tests", "submit_ranking")


def build_tiny_model(path: str | Path, *, seed: int = 0, max_positions: int = 8192) -> Path:
    """Write a LlamaForCausalLM with random weights and a trained byte-level BPE to `path`.

    The folder loads with `AutoModelForCausalLM.from_pretrained(path, local_files_only=True)`
    and `AutoTokenizer.from_pretrained(path, local_files_only=True)`.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(_corpus(seed)),
        eos_token="<|end|>",
        pad_token="<|pad|>",
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_positions,
    )
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB_SIZE,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _train_tokenizer(lines: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def _corpus(seed: int) -> list[str]:
    """Lines like what the grader reads and writes: its prompt, JSON actions, code, prose."""
    from grading.workspace import SYSTEM_PROMPT

    rng = random.Random(seed)
    vocabulary = _CODE_WORDS + tuple(SYSTEM_PROMPT.replace(",", " ").replace(".", " ").split())

    def name() -> str:
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))

    def words() -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 12)))

    lines = SYSTEM_PROMPT.splitlines() * 20
    for _ in range(CORPUS_LINES // 3):
        label = rng.choice("ABCDEFGH")
        lines.append(json.dumps({"tool": rng.choice(_TOOLS), "label": label, "note": words()},
                                separators=(", ", ": ")))
        lines.append(f"{rng.choice('+- ')}    {rng.choice(vocabulary)}_{name()} = "
                     f"{rng.choice(vocabulary)}({name()}, {rng.randint(0, 999)})  # {words()}")
        lines.append(f"{words().capitalize()}. See {label} src/{name()}.py:{rng.randint(1, 400)}")
    return lines
