"""Benchmark for a GPU machine: the agentic grader on a ~1B-parameter random model, one command.

The model is created on the device with random weights (a Llama of ~0.97B parameters;
nothing is downloaded) and the tiny model's tokenizer. 64 groups x 8 trajectories x 10
turns (`min_turns` fixes the count) go through the lockstep loop on the transformers
backend, and on vLLM when it is importable (the random model is saved to a temp folder
for it). Prints groups/min, generated tokens/s, the time of one turn at batch 1 (one
group alone) against batch 64 (all groups in lockstep), the GPU's busy share (nvidia-smi's
utilization.gpu, sampled every 100 ms) and the share of the memory-bandwidth bound the
run reached: the decode steps of the turns it ran, each reading the weights once and
every row's cache, at --bandwidth bytes/s (default 4.8e12, an H200's HBM3e).

    python bench/gpu_grader.py            # on a GPU machine
    python bench/gpu_grader.py --small    # a ~1M-parameter model on CPU, fewer groups
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.agentic import bench_groups  # noqa: E402
from grading.backends import Sampling, load_backend  # noqa: E402
from grading.graders.agentic import AgenticGrader, Budget  # noqa: E402
from grading.tiny_model import build_tiny_model  # noqa: E402
from grading.tool_limits import Caps  # noqa: E402

LARGE = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
             num_attention_heads=32, num_key_value_heads=4)
SMALL = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2)
H200_BANDWIDTH = 4.8e12  # bytes/s, HBM3e


def kv_bytes_per_token(config, dtype_bytes: int) -> int:
    """Bytes of keys and values one token holds in the cache, over all layers."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * dtype_bytes


def bandwidth_bound_s(calls: list[list[tuple[int, int]]], *, weight_bytes: int,
                      kv_bytes_per_token: int, bandwidth: float) -> float:
    """Seconds the decode steps of `calls` take at least when memory bandwidth is the limit.

    `calls` holds, per generate call, (prompt_tokens, completion_tokens) per reply. A call
    decodes as one batch for as many steps as its longest reply; each step reads the
    weights once, and each row still decoding reads its cache: its n-th new token
    (n from 0) reads prompt + n tokens. Prefill (compute, not bandwidth) is not counted.

    >>> bandwidth_bound_s([[(10, 3), (20, 1)]], weight_bytes=1000, kv_bytes_per_token=2,
    ...                   bandwidth=100)
    31.06
    """
    read = 0
    for replies in calls:
        read += max(new for _, new in replies) * weight_bytes
        read += sum(new * prompt + new * (new - 1) // 2 for prompt, new in replies) * kv_bytes_per_token
    return read / bandwidth


def random_model(tokenizer_dir: Path, shape: dict, device: str, dtype):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    config = LlamaConfig(**shape, vocab_size=len(tokenizer), max_position_embeddings=32768,
                         tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def run(name: str, backend, groups, turns: int, device: str, bound) -> None:
    """`bound(calls)`: the bandwidth bound in seconds of the generate calls recorded."""
    grader = AgenticGrader(backend, sampling=Sampling(),
                           caps=Caps(output_chars=3000, statement_chars=1500),
                           budget=Budget(max_turns=turns, min_turns=turns - 1,
                                         max_tokens=24000, rationale_chars=120))
    grader.rank_many(groups[:2])  # warm up: kernels, grammar compilation
    single = _timed(grader, groups[:1])
    calls = record_calls(backend)
    if device.startswith("cuda"):
        with GpuBusy(device) as busy:
            batch = _timed(grader, groups)
        busy_share = f"{busy.share:.0%}"
    else:
        batch = _timed(grader, groups)
        busy_share = "n/a (CPU)"
    bound_s = bound(calls)
    print(f"{name}: {batch['groups_per_min']:.1f} groups/min, "
          f"{batch['tokens'] / batch['seconds']:.0f} generated tokens/s "
          f"({batch['turns']} turns, {batch['tokens']} tokens in {batch['seconds']:.1f} s); "
          f"GPU busy {busy_share}; bandwidth bound {bound_s:.3g} s, "
          f"{bound_s / batch['seconds']:.1%} of it reached; "
          f"time per turn: batch 1 {single['per_turn']:.2f} s, "
          f"batch {len(groups)} {batch['per_turn']:.2f} s; "
          f"one group alone: {single['groups_per_min']:.1f} groups/min")


def record_calls(backend) -> list[list[tuple[int, int]]]:
    """Wrap the backend's generate; the list collects (prompt, completion tokens) per reply
    of each call."""
    calls, generate = [], backend.generate

    def recording(conversations, schemas, sampling):
        replies = generate(conversations, schemas, sampling)
        calls.append([(r.prompt_tokens, r.completion_tokens) for r in replies
                      if not isinstance(r, Exception)])
        return replies

    backend.generate = recording
    return calls


class GpuBusy:
    """The share of time a kernel ran on `device` while the block ran: nvidia-smi's
    utilization.gpu, every 100 ms, averaged."""

    def __init__(self, device: str):
        import torch

        self.uuid = str(torch.cuda.get_device_properties(device).uuid)

    def __enter__(self):
        self.process = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=uuid,utilization.gpu", "--format=csv,noheader,nounits",
             "--loop-ms=100"], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        output, _ = self.process.communicate()
        samples = [float(line.split(",")[1]) for line in output.splitlines()
                   if line.split(",")[0].strip().endswith(self.uuid)]
        if not samples:
            raise RuntimeError(f"nvidia-smi reported no utilization for GPU {self.uuid}")
        self.share = sum(samples) / len(samples) / 100


def _timed(grader: AgenticGrader, groups) -> dict:
    started = time.perf_counter()
    results = grader.rank_many(groups)
    seconds = time.perf_counter() - started
    graded = [r for r in results if not isinstance(r, Exception)]
    if len(graded) < len(results):
        failed = next(r for r in results if isinstance(r, Exception))
        print(f"  {len(results) - len(graded)} of {len(results)} groups failed: {failed}")
    calls = max((r.usage.get("turns", 0) for r in graded), default=1)
    return {"seconds": seconds, "groups_per_min": len(groups) / seconds * 60,
            "turns": sum(r.usage.get("turns", 0) for r in graded),
            "tokens": sum(r.usage.get("completion_tokens", 0) for r in graded),
            "per_turn": seconds / max(calls, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a small model on CPU")
    parser.add_argument("--groups", type=int)
    parser.add_argument("--trajectories", type=int, default=8)
    parser.add_argument("--turns", type=int)
    parser.add_argument("--device", default=None, help="default: cuda when available")
    parser.add_argument("--max-batch", type=int, help="rows per generate call (default: all)")
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--bandwidth", type=float, default=H200_BANDWIDTH,
                        help="memory bandwidth in bytes/s for the bound (default: an H200's)")
    args = parser.parse_args()

    import torch

    from grading.backends.transformers_backend import TransformersBackend

    device = args.device or ("cuda" if torch.cuda.is_available() and not args.small else "cpu")
    groups_n = args.groups or (16 if args.small else 64)
    turns = args.turns or (4 if args.small else 10)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    if device == "cpu":
        torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        tokenizer_dir = build_tiny_model(Path(folder) / "tokenizer")
        model, tokenizer = random_model(tokenizer_dir, SMALL if args.small else LARGE,
                                        device, dtype)
        params = sum(p.numel() for p in model.parameters())
        name = f"random-{params / 1e9:.2f}B" if params > 1e8 else f"random-{params / 1e6:.1f}M"
        dtype_bytes = torch.finfo(dtype).bits // 8
        bound = partial(bandwidth_bound_s, weight_bytes=params * dtype_bytes,
                        kv_bytes_per_token=kv_bytes_per_token(model.config, dtype_bytes),
                        bandwidth=args.bandwidth)
        print(f"{name} ({params:,} parameters, {dtype}) on {device}; {groups_n} groups x "
              f"{args.trajectories} trajectories x {turns} turns; bandwidth bound at "
              f"{args.bandwidth:.3g} B/s")
        groups = bench_groups(groups_n, args.trajectories)
        backend = TransformersBackend.from_loaded(model, tokenizer, model_id=name,
                                                  max_batch=args.max_batch or groups_n)
        run("transformers", backend, groups, turns, device, bound)
        if args.no_vllm or not device.startswith("cuda"):
            return
        try:
            import vllm  # noqa: F401
        except ImportError:
            print("vllm: not installed, skipped")
            return
        saved = Path(folder) / name
        model.save_pretrained(saved)
        tokenizer.save_pretrained(saved)
        del backend, model
        torch.cuda.empty_cache()
        run("vllm", load_backend("vllm", model=str(saved), gpu_memory_utilization=0.5,
                                 max_model_len=32768), groups, turns, device, bound)


if __name__ == "__main__":
    main()
