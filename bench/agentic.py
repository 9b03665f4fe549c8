"""Benchmark: the agentic grader's lockstep batching against one group at a time, in one run.

The tiny random-weight model on CPU (transformers backend, xgrammar-constrained), the
sample groups replicated to --groups groups (at most 4 passing each, so every ranking
is enumerated and no repair turn can change the count). `min_turns = turns - 1` holds the
submission back, so every run takes exactly --turns turns; with greedy decoding (the
default) both modes also generate the same tokens: the same work, once as one batched
generate call per turn over all groups, once group by group. Target: lockstep >= 3x.

On CPU the batch amortises the fixed cost of a decode step (about 1.3 ms at batch 1),
but not prefill, whose attention compute is the same row by row or batched; the ratio
therefore falls as tool outputs (and so prefill) grow. Both modes start with an empty
prefix cache and alternate, in --pairs pairs; the ratio is the median over the pairs.
Torch uses every core by default: a batch's attention spreads over them, a single
row's decode step hardly does. bench/gpu_grader.py measures the same loop on a GPU.

Run: .venv/bin/python bench/agentic.py [--groups 32] [--turns 4] [--threads N] [--pairs 3]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grading.backends import Sampling, load_backend  # noqa: E402
from grading.cases import GroupCase  # noqa: E402
from grading.graders.agentic import AgenticGrader, Budget  # noqa: E402
from grading.rollouts import load_rollouts  # noqa: E402
from grading.tiny_model import build_tiny_model  # noqa: E402
from grading.tool_limits import Caps  # noqa: E402
from tests.grading.agentic_fixtures import SAMPLE, groups_from_rollouts  # noqa: E402

MAX_PASSING = 4


def bench_groups(n: int, trajectories: int) -> list[GroupCase]:
    """`n` groups of `trajectories` each from the sample data, at most 4 passing per group."""
    samples = [g for g in groups_from_rollouts(load_rollouts([SAMPLE])) if len(g.passing) >= 2]
    groups = []
    for i in range(n):
        source = samples[i % len(samples)]
        passing = [t for t in source.trajectories if t.passed][:MAX_PASSING]
        failing = [t for t in source.trajectories if not t.passed] or [
            replace(t, passed=False, reward=0.0) for t in source.trajectories]
        members = passing + [failing[j % len(failing)]
                             for j in range(max(0, trajectories - len(passing)))]
        members = [replace(t, trajectory_id=f"{t.trajectory_id}-{j}")
                   for j, t in enumerate(members[:trajectories])]
        groups.append(replace(source, group_id=f"{source.group_id}#{i}",
                              trajectories=tuple(members)))
    return groups


def measure(grader: AgenticGrader, groups: list[GroupCase], *, lockstep: bool):
    started = time.perf_counter()
    if lockstep:
        results = grader.rank_many(groups)
    else:
        results = [r for group in groups for r in grader.rank_many([group])]
    seconds = time.perf_counter() - started
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise SystemExit(f"{len(failed)} groups failed, e.g. {failed[0]}")
    turns = sum(r.usage["turns"] for r in results)
    tokens = sum(r.usage["completion_tokens"] for r in results)
    return seconds, turns, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--trajectories", type=int, default=6)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="torch threads (default: every core of the machine)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--output-chars", type=int, default=2000, help="tool output cap")
    parser.add_argument("--rationale-chars", type=int, default=120)
    parser.add_argument("--pairs", type=int, default=3, help="lockstep/sequential pairs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_model(Path(folder) / "tiny")
        backend = load_backend("transformers", model=str(model), threads=args.threads)
        grader = AgenticGrader(
            backend, sampling=Sampling(temperature=args.temperature),
            caps=Caps(output_chars=args.output_chars, statement_chars=1500),
            budget=Budget(max_turns=args.turns, min_turns=args.turns - 1,
                          rationale_chars=args.rationale_chars))
        groups = bench_groups(args.groups, args.trajectories)
        grader.rank_many(groups[:2])  # warm up: first-call costs, grammar compilation
        print(f"{args.groups} groups x {args.trajectories} trajectories, {args.turns} turns, "
              f"tool outputs <= {args.output_chars} chars, tiny model on CPU "
              f"({args.threads} threads), grader {grader.version}")
        # Each mode starts with no cached prompt prefix (or the second would reuse the
        # first's), and the modes alternate, the ratio taken per pair: this machine's
        # speed drifts by tens of percent within minutes.
        ratios = []
        for _ in range(args.pairs):
            rates = {}
            for name, lockstep in (("lockstep", True), ("sequential", False)):
                backend.reset_prefix_cache()
                seconds, turns, tokens = measure(grader, groups, lockstep=lockstep)
                rates[name] = args.groups / seconds * 60
                print(f"{name:>10}: {seconds:7.1f} s  {rates[name]:7.1f} groups/min  "
                      f"{turns} turns  {tokens} generated tokens  {tokens / seconds:7.0f} tokens/s")
            ratios.append(rates["lockstep"] / rates["sequential"])
        print(f"lockstep / sequential: {statistics.median(ratios):.1f}x median of the pairs "
              f"({', '.join(f'{r:.1f}' for r in ratios)}) (target >= 3x)")


if __name__ == "__main__":
    main()
