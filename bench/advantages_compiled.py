"""Experiment: how far compiled code gets on bench/advantages.py's batch.

The same 1,000,000 trajectories (contiguous groups of 16, `linear` schedule,
flags) through one fused numba kernel that does in a single pass per group what
`gagar_advantages` does in some 60 numpy passes: GRPO, the competition-rank
check, tie counts, factors with the flag cap, and the sum-preserving rescale.
It covers only that case (one group width, one schedule, sample std), so it is
a bound for the design, not a candidate for `grading/`. Timed against the
plain-loop reference and `gagar_advantages` in the same run.
numba is not a project dependency:
  .venv/bin/pip install numba==0.68.1 && .venv/bin/python bench/advantages_compiled.py
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.advantages import GROUP_SIZE, PARAMS, W_FLAG, loop, make_batch, timed, vectorised  # noqa: E402

try:
    import numba
except ImportError:
    sys.exit("numba is not installed (it is not a project dependency): .venv/bin/pip install numba==0.68.1")

EPS, RTOL = 1e-6, 1e-12
RUNS = 15


@numba.njit(cache=True)
def fused(width, r, passed, ranks, flagged, w_min, w_flag, grpo, factors, out):
    """Fills grpo, factors, out; returns the first group with bad ranks, or -1."""
    count = np.zeros(width + 1, np.intp)  # trajectories per rank, within one group
    for k in range(r.size // width):
        lo, hi = k * width, (k + 1) * width
        total, n_pass, n_ranked = 0.0, 0, 0
        for i in range(lo, hi):
            total += r[i]
            n_pass += passed[i]
            n_ranked += ranks[i] > 0
        mean = total / width
        squares = 0.0
        for i in range(lo, hi):
            squares += (r[i] - mean) ** 2
        std = (np.sqrt(squares / (width - 1)) if width > 1 else 0.0) + EPS
        count[:] = 0
        for i in range(lo, hi):
            grpo[i] = (r[i] - mean) / std
            if ranks[i] > n_ranked:
                return k
            count[ranks[i]] += 1
        ahead = 0
        for rank in range(1, n_ranked + 1):
            if count[rank] and ahead != rank - 1:
                return k
            ahead += count[rank]
        half_step = (1 - w_min) / (2 * max(n_ranked - 1, 1))
        n_j, s, weighted, f_max, f_min = 0, 0.0, 0.0, -np.inf, np.inf
        for i in range(lo, hi):
            rank = ranks[i]
            factors[i] = np.nan
            if rank:
                w = 1 - half_step * (2 * rank + count[rank] - 3)
                factors[i] = min(w, w_flag) if flagged[i] else w
                if grpo[i] > 0:
                    n_j += 1
                    s += grpo[i]
                    weighted += grpo[i] * factors[i]
                    f_max, f_min = max(f_max, factors[i]), min(f_min, factors[i])
        moved = n_pass == n_ranked and n_j > 1 and f_max - f_min > RTOL * f_max
        for i in range(lo, hi):
            out[i] = grpo[i] * factors[i] * (s / weighted) if moved and ranks[i] and grpo[i] > 0 else grpo[i]
    return -1


def compiled(b: dict[str, np.ndarray]) -> np.ndarray:
    n = b["rewards"].size
    grpo, factors, out = np.empty(n), np.empty(n), np.empty(n)
    bad = fused(GROUP_SIZE, b["rewards"], b["passed"], b["ranks"], b["flagged"], PARAMS["w_min"], W_FLAG,
                grpo, factors, out)
    assert bad == -1, f"group {bad}: not competition ranks"
    return out


def main() -> None:
    b = make_batch(1_000_000)
    # Both timed before the loop, as bench/advantages.py does: the loop's million
    # Python objects leave the heap in a state that slows numpy's temporaries.
    runs = {name: timed(fn, b, RUNS) for name, fn in
            (("gagar_advantages (numpy)", vectorised), ("fused numba kernel", compiled))}
    start = time.perf_counter()
    expected = np.asarray(loop(b))
    loop_s = time.perf_counter() - start
    print(f"batch: 1,000,000 trajectories in contiguous groups of {GROUP_SIZE}; plain loop {loop_s:.2f} s")
    for name, (seconds, got) in runs.items():
        diff = float(np.max(np.abs(got - expected)))
        print(f"{name}: median {seconds * 1e3:.1f} ms, speed-up {loop_s / seconds:,.0f}x, "
              f"max abs difference {diff:.3g}")


if __name__ == "__main__":
    main()
