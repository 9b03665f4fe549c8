"""The batch measures (every group at once) give the per-group functions' values, and
`mean_estimates` gives `mean_estimate`'s, on seeded random cases."""

import random

import numpy as np
import pytest

from grading.agreement import (
    average_ranks,
    average_ranks_many,
    group_agreement,
    group_agreement_many,
    mean_estimate,
    mean_estimates,
    padded,
    rank_correlation_many,
    rank_correlation_with,
)
from tests.grading.random_rankings import random_tiers


def random_pairs(rng, n):
    """Pairs of rankings of 0 to 9 items with ties, the second missing some and adding one."""
    pairs = []
    for _ in range(n):
        items = [f"t{i}" for i in range(rng.randrange(0, 10))]
        predicted = [i for i in items if rng.random() < 0.85] + (["extra"] if rng.random() < 0.2 else [])
        pairs.append((random_tiers(rng, items), random_tiers(rng, predicted)))
    return pairs


def as_array(values):
    return np.array([np.nan if v is None else float(v) for v in values])


def test_group_agreement_many_is_group_agreement_of_each_pair():
    pairs = random_pairs(random.Random(3), 2000)
    many = group_agreement_many(pairs)
    one = [group_agreement(reference, predicted) for reference, predicted in pairs]
    for name in ("tau", "pairwise", "top1", "spearman"):
        expected = as_array(getattr(g, name) for g in one)
        assert np.array_equal(np.isnan(getattr(many, name)), np.isnan(expected)), name
        assert getattr(many, name) == pytest.approx(expected, rel=1e-12, abs=1e-12, nan_ok=True), name
    assert np.isnan(many.tau).any() and (~np.isnan(many.spearman)).sum() > 1000  # both kinds of case drawn


def test_no_pair_at_all():
    many = group_agreement_many([])
    assert many.tau.shape == many.top1.shape == (0,)


def test_average_ranks_many_is_average_ranks_of_each_row():
    rng = random.Random(5)
    rows = [[rng.choice([1.0, 2.5, 7.0, 7.0, 9.0]) for _ in range(rng.randrange(1, 12))] for _ in range(300)]
    values, valid = padded(rows, dtype=np.float64)
    ranks = average_ranks_many(values, valid)
    for i, row in enumerate(rows):
        assert ranks[i, :len(row)].tolist() == average_ranks(row).tolist()


def test_rank_correlation_many_gives_rank_correlation_with():
    rng = random.Random(7)
    ranks, values, groups = [], [], []
    for g in range(400):
        size = rng.randrange(1, 9)
        ranks += [rng.randrange(1, 5) for _ in range(size)]
        values += [rng.choice([10, 20, 30, rng.random()]) for _ in range(size)]
        groups += [f"g{g}"] * size
    rows = {}
    for rank, value, group in zip(ranks, values, groups, strict=True):
        rows.setdefault(group, ([], []))
        rows[group][0].append(rank)
        rows[group][1].append(value)
    r, valid = padded([pair[0] for pair in rows.values()], dtype=np.float64)
    v, _ = padded([pair[1] for pair in rows.values()], dtype=np.float64)
    (got,) = mean_estimates([rank_correlation_many(r, v, valid)])
    expected = rank_correlation_with(ranks, values, groups)
    assert got.n == expected.n and got.value == pytest.approx(expected.value, rel=1e-12)
    assert got.interval == pytest.approx(expected.interval, rel=1e-12)


@pytest.mark.parametrize("size", [1, 2, 7, 8, 9, 101, 2500])
def test_mean_estimates_are_mean_estimate_exactly(size):
    rng = random.Random(size)
    columns = [[rng.random() if rng.random() < 0.9 else None for _ in range(size)],
               [float(rng.random() < 0.5) for _ in range(size)], [None] * size]
    for seed, resamples, confidence in ((0, 2000, 0.95), (4, 333, 0.9)):
        got = mean_estimates([as_array(c) for c in columns], seed=seed, resamples=resamples, confidence=confidence)
        assert got == [mean_estimate(c, seed=seed, resamples=resamples, confidence=confidence) for c in columns]
