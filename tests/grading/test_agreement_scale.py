"""The agreement measures on large groups: counted by sorting, not pairwise, with the values of
the pairwise definitions (plain loops here), and the many-group measures in memory bounded
by the widest group, not by a batch's group count times it."""

import random
import tracemalloc
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grading import agreement
from grading.agreement import (
    BLOCK_CELLS,
    PAIRWISE_WIDTH,
    blocks,
    group_agreement_many,
    kendall_tau,
    pair_counts,
    pairwise_accuracy,
    positions,
    rank_correlation_rows,
    rank_correlation_with,
    spearman,
)
from tests.grading.random_rankings import random_tiers


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def signs(a, b) -> list[tuple[int, int]]:
    """The pairwise definition: each common pair's order in a and in b."""
    pa, pb = positions(a), positions(b)
    common = sorted(pa.keys() & pb.keys())
    return [(sign(pa[x] - pa[y]), sign(pb[x] - pb[y])) for x, y in combinations(common, 2)]


def reference_tau(a, b):
    pairs = signs(a, b)
    untied_a, untied_b = sum(1 for sa, _ in pairs if sa), sum(1 for _, sb in pairs if sb)
    if not untied_a or not untied_b:
        return None
    return sum(sa * sb for sa, sb in pairs) / (untied_a * untied_b) ** 0.5


def reference_pairwise(reference, predicted):
    scores = [1.0 if sr == sp else 0.5 if sp == 0 else 0.0 for sr, sp in signs(reference, predicted) if sr]
    return sum(scores) / len(scores) if scores else None


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=40))
def test_pair_counts_are_those_counted_pair_by_pair(scored):
    x = np.array([s[0] for s in scored], dtype=np.int64)
    y = np.array([s[1] for s in scored], dtype=np.int64)
    pairs = [(sign(xi - xj), sign(yi - yj)) for (xi, yi), (xj, yj) in combinations(scored, 2)]
    counts = pair_counts(x, y)
    assert counts.concordant_minus_discordant == sum(sa * sb for sa, sb in pairs)
    assert counts.untied_a == sum(1 for sa, _ in pairs if sa)
    assert counts.untied_b == sum(1 for _, sb in pairs if sb)
    assert counts.tied_b_only == sum(1 for sa, sb in pairs if sa and not sb)


@pytest.mark.parametrize("seed", range(8))
def test_tau_and_pairwise_accuracy_of_wide_rankings_are_the_pairwise_ones(seed):
    rng = random.Random(seed)
    items = [f"t{i}" for i in range(rng.randrange(250, 400))]
    a = random_tiers(rng, items)
    b = random_tiers(rng, [i for i in items if rng.random() < 0.9])
    assert kendall_tau(a, b) == reference_tau(a, b)
    assert pairwise_accuracy(reference=a, predicted=b) == reference_pairwise(a, b)


def test_group_agreement_many_measures_wide_groups_like_narrow_ones():
    """Groups on both sides of PAIRWISE_WIDTH, mixed in one call, each against the loops."""
    rng = random.Random(11)
    pairs = []
    for width in [0, 1, 2, 5, 9, 40, PAIRWISE_WIDTH, PAIRWISE_WIDTH + 1, 300, 700] + [rng.randrange(0, 12)
                                                                                    for _ in range(200)]:
        items = [f"t{i}" for i in range(width)]
        pairs.append((random_tiers(rng, items), random_tiers(rng, [i for i in items if rng.random() < 0.9])))
    pairs.append(([["a"]], []))  # an empty side: top-1 undefined
    many = group_agreement_many(pairs)
    for i, (reference, predicted) in enumerate(pairs):
        tau, pairwise = reference_tau(reference, predicted), reference_pairwise(reference, predicted)
        assert many.tau[i] == pytest.approx(np.nan if tau is None else tau, rel=1e-12, nan_ok=True), i
        assert many.pairwise[i] == (pytest.approx(np.nan, nan_ok=True) if pairwise is None else pairwise), i
        top1 = bool(reference and predicted and set(reference[0]) & set(predicted[0]))
        assert many.top1[i] == (pytest.approx(np.nan, nan_ok=True) if not reference or not predicted else top1), i
        rho = spearman(reference, predicted)
        assert many.spearman[i] == pytest.approx(np.nan if rho is None else rho, rel=1e-9, nan_ok=True), i


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_one_wide_group_among_many_narrow_ones_takes_memory_for_itself_alone():
    """A batch of 60 groups of 5 and one of 800: padding every group to the widest and comparing
    every pair would hold (61, 800, 800) arrays, 300 MiB each; blocks of like widths and the wide
    group by sorting stay within a few of BLOCK_CELLS."""
    rng = random.Random(2)
    pairs = []
    for width in [5] * 60 + [800]:
        items = [f"t{i}" for i in range(width)]
        pairs.append((random_tiers(rng, items), random_tiers(rng, items)))
    assert peak_bytes(lambda: group_agreement_many(pairs)) < 8 * 8 * BLOCK_CELLS
    ranks = [[float(r) for r in range(len(reference))] for reference, _ in pairs]
    values = [[rng.random() for _ in row] for row in ranks]
    assert peak_bytes(lambda: rank_correlation_rows(ranks, values)) < 8 * 8 * BLOCK_CELLS


def test_blocks_hold_rows_of_like_width_within_the_budget():
    widths = [3] * 5000 + [50] * 100 + [2000, 0]
    found = blocks(widths, cells=lambda width: width * width)
    assert sorted(i for block in found for i in block.tolist()) == list(range(len(widths)))
    for block in found:
        widest = max(widths[i] for i in block)
        assert len(block) == 1 or widest * widest * len(block) <= BLOCK_CELLS


def test_rank_correlation_rows_is_rank_correlation_with_per_group():
    rng = random.Random(4)
    ranks, values = [], []
    for size in [1, 2, 3, 8, 300, 5000] + [rng.randrange(1, 9) for _ in range(100)]:
        ranks.append([float(rng.randrange(1, 6)) for _ in range(size)])
        values.append([rng.choice([10.0, 20.0, rng.random()]) for _ in range(size)])
    got = rank_correlation_rows(ranks, values)
    for i, (r, v) in enumerate(zip(ranks, values, strict=True)):
        per_group = [agreement._pearson(agreement.average_ranks(r), agreement.average_ranks(v))]
        expected = np.nan if per_group[0] is None else per_group[0]
        assert got[i] == pytest.approx(expected, rel=1e-9, nan_ok=True), i
    assert rank_correlation_with([1, 2], [5, 6], ["g", "g"]).value == pytest.approx(1.0)
