"""Benchmark: vectorised GAGAR advantages against the plain-loop reference, in one run.

1,000,000 trajectories in 62,500 groups of 16, binary rewards (mixed, all-pass
and all-fail groups), every pass ranked with ties, ~5% of ranked flagged; timed
twice on the same batch: groups contiguous (each prompt's 16 rollouts in a row,
as verl and TRL lay out a batch: the fast path) and shuffled (the general path),
each against the loop reference run on the same data.
Run: .venv/bin/python bench/advantages.py [--n N] [--runs R]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grading.advantages import gagar_advantages  # noqa: E402
from tests.grading import reference_advantages as ref  # noqa: E402

GROUP_SIZE = 16
SCHEDULE, PARAMS, W_FLAG = "linear", {"w_min": 0.2}, 0.3
LOOP_SECONDS_BEFORE_SUBSET = 60
SUBSET = 100_000


def make_batch(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_groups = n // GROUP_SIZE
    g = np.repeat(np.arange(n_groups), GROUP_SIZE)
    kind = rng.choice(3, size=n_groups, p=[0.7, 0.1, 0.2])  # mixed, all pass, all fail
    pass_rate = np.choose(kind, [rng.uniform(0.1, 0.9, n_groups), 1.0, 0.0])
    passed = rng.random(g.size) < pass_rate[g]
    quality = rng.integers(0, 5, g.size)  # five levels in groups of 16: many ties
    # Competition rank among the passes of a group: 1 + passes with better quality.
    idx = np.flatnonzero(passed)
    order = idx[np.lexsort((-quality[idx], g[idx]))]
    pos = np.arange(order.size)
    new_group = np.r_[True, g[order][1:] != g[order][:-1]]
    new_level = new_group | np.r_[True, quality[order][1:] != quality[order][:-1]]
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    level_start = np.maximum.accumulate(np.where(new_level, pos, 0))
    ranks = np.zeros(g.size, dtype=np.int64)
    ranks[order] = level_start - group_start + 1
    flagged = (ranks > 0) & (rng.random(g.size) < 0.05)
    return {
        "rewards": passed.astype(np.float64),
        "group_index": g,
        "passed": passed,
        "ranks": ranks,
        "flagged": flagged,
    }


def shuffled(b: dict[str, np.ndarray], seed: int = 1) -> dict[str, np.ndarray]:
    """The same batch with the trajectories of each group scattered over it."""
    order = np.random.default_rng(seed).permutation(b["rewards"].size)
    return {k: v[order] for k, v in b.items()}


def vectorised(b: dict[str, np.ndarray]) -> np.ndarray:
    return gagar_advantages(
        b["rewards"], b["group_index"], b["passed"], b["ranks"], schedule=SCHEDULE,
        params=PARAMS, flagged=b["flagged"], w_flag=W_FLAG,
    ).advantages


def loop(b: dict[str, np.ndarray]) -> list[float]:
    lists = {k: v.tolist() for k, v in b.items()}
    return ref.gagar(
        lists["rewards"], lists["group_index"], lists["passed"], lists["ranks"],
        schedule=SCHEDULE, params=PARAMS, flagged=lists["flagged"], w_flag=W_FLAG,
    )[2]


def subset(b: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    keep = b["group_index"] < n // GROUP_SIZE  # whole groups only
    return {k: v[keep] for k, v in b.items()}


def timed(fn, b: dict[str, np.ndarray], runs: int) -> tuple[float, np.ndarray]:
    """Median seconds of ``fn(b)`` after a warm-up, and its result. Each result is
    kept until the next is made, as a trainer's would be: freeing it first lets
    glibc hand the memory back, and the next call's page faults then cost numpy
    more than its arithmetic."""
    got = fn(b)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        got = fn(b)
        times.append(time.perf_counter() - start)
    return statistics.median(times), got


def measure(b: dict[str, np.ndarray], runs: int) -> tuple[float, float, str, float, int]:
    """Median vectorised seconds, loop seconds (and how they were timed), max abs
    difference and on how many trajectories it was taken."""
    vec_s, got = timed(vectorised, b, runs)

    n = b["rewards"].size
    probe = subset(b, SUBSET) if n > SUBSET else b
    start = time.perf_counter()
    expected = loop(probe)
    probe_s = time.perf_counter() - start
    scale = n / probe["rewards"].size
    note = ""
    if scale > 1 and probe_s * scale <= LOOP_SECONDS_BEFORE_SUBSET:
        start = time.perf_counter()
        expected = loop(b)
        loop_s = time.perf_counter() - start
        probe = b
    else:
        loop_s = probe_s * scale
        if scale > 1:
            note = f" (timed on a {probe['rewards'].size:,} subset, scaled linearly x{scale:g})"
    on_probe = got if probe is b else vectorised(probe)
    diff = float(np.max(np.abs(on_probe - np.asarray(expected)), initial=0.0))
    return vec_s, loop_s, note, diff, probe["rewards"].size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    b = make_batch(args.n)
    print(f"batch: {args.n:,} trajectories, {args.n // GROUP_SIZE:,} groups of {GROUP_SIZE}, "
          f"{SCHEDULE} {PARAMS}, w_flag={W_FLAG}")
    for layout, batch in (("contiguous groups", b), ("shuffled groups", shuffled(b))):
        vec_s, loop_s, note, diff, checked = measure(batch, args.runs)
        print(f"{layout}: vectorised median {vec_s * 1e3:.1f} ms over {args.runs} runs, "
              f"plain-loop reference {loop_s:.2f} s{note}, speed-up {loop_s / vec_s:,.0f}x, "
              f"max abs difference {diff:.3g} (on {checked:,} trajectories)")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
