"""Per-group measures (Spearman beside tau, pairwise, top-1), their group-bootstrap
summary, and rank correlation with a covariate (position bias)."""

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from grading.agreement import (
    GroupAgreement,
    average_ranks,
    group_agreement,
    kendall_tau,
    rank_correlation_with,
    spearman,
    summarise,
)
from tests.grading.random_rankings import random_tiers


def as_tiers(scores, items):
    return [[i for i, s in zip(items, scores, strict=True) if s == level] for level in sorted(set(scores))]


scored_pairs = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=9)


@given(scored_pairs)
def test_spearman_matches_scipy_with_ties(scored):
    items = [f"t{i}" for i in range(len(scored))]
    x, y = [s[0] for s in scored], [s[1] for s in scored]
    got = spearman(as_tiers(x, items), as_tiers(y, items))
    if len(set(x)) == 1 or len(set(y)) == 1:
        assert got is None
    else:
        assert got == pytest.approx(stats.spearmanr(x, y).statistic)


@given(scored_pairs)
def test_kendall_tau_matches_scipy_tau_b(scored):
    items = [f"t{i}" for i in range(len(scored))]
    x, y = [s[0] for s in scored], [s[1] for s in scored]
    got = kendall_tau(as_tiers(x, items), as_tiers(y, items))
    if len(set(x)) == 1 or len(set(y)) == 1:
        assert got is None
    else:
        assert got == pytest.approx(stats.kendalltau(x, y, variant="b").statistic)


def test_average_ranks_share_the_mean_of_the_ranks_they_span():
    assert average_ranks([3, 1, 3, 3, 0]).tolist() == [4.0, 2.0, 4.0, 4.0, 1.0]


def test_spearman_with_a_tie_by_hand():
    # ranks 1, 2.5, 2.5 against 1, 2, 3: covariance 1.5 over sqrt(1.5 * 2)
    assert spearman([["a"], ["b", "c"]], [["a"], ["b"], ["c"]]) == pytest.approx(1.5 / np.sqrt(3))


def test_spearman_compares_only_common_items_and_ranks_among_them():
    assert spearman([["a"], ["x"], ["b"], ["c"]], [["a"], ["b"], ["y"], ["c"]]) == pytest.approx(1.0)
    assert spearman([["a"], ["b"]], [["b"], ["a"]]) == pytest.approx(-1.0)


def test_one_passing_trajectory_leaves_only_top1_defined():
    assert group_agreement([["a"]], [["a"]]) == GroupAgreement(tau=None, pairwise=None, top1=True, spearman=None)


def test_a_reference_that_ties_everything_leaves_only_top1_defined():
    got = group_agreement([["a", "b", "c"]], [["c"], ["b"], ["a"]])
    assert got == GroupAgreement(tau=None, pairwise=None, top1=True, spearman=None)


def test_a_prediction_that_ties_everything_scores_half_pairwise_and_no_correlation():
    got = group_agreement([["a"], ["b"], ["c"]], [["a", "b", "c"]])
    assert got == GroupAgreement(tau=None, pairwise=0.5, top1=True, spearman=None)


def test_summary_gives_each_measure_over_the_groups_where_it_is_defined():
    pairs = [
        ([["a"], ["b"], ["c"]], [["a"], ["b"], ["c"]]),  # all four: 1
        ([["a"], ["b"], ["c"]], [["c"], ["b"], ["a"]]),  # tau -1, pairwise 0, top-1 0, spearman -1
        ([["a"]], [["a"]]),  # only top-1
    ]
    summary = summarise(pairs)
    assert (summary.kendall_tau.value, summary.kendall_tau.n) == (pytest.approx(0.0), 2)
    assert (summary.pairwise_accuracy.value, summary.pairwise_accuracy.n) == (0.5, 2)
    assert (summary.top1.value, summary.top1.n) == (pytest.approx(2 / 3), 3)
    assert (summary.spearman.value, summary.spearman.n) == (pytest.approx(0.0), 2)
    assert summary.spearman.interval == (pytest.approx(-1.0), pytest.approx(1.0))


def test_summary_interval_resamples_groups_and_is_seeded():
    rng = random.Random(7)
    pairs = [(random_tiers(rng, "abcde"), random_tiers(rng, "abcde")) for _ in range(300)]
    summary = summarise(pairs, seed=3)
    taus = np.array([t for a, b in pairs if (t := kendall_tau(a, b)) is not None])
    low, high = summary.kendall_tau.interval
    assert low < summary.kendall_tau.value < high
    # over many groups the percentile interval is close to the normal one for the mean
    half = 1.96 * taus.std(ddof=1) / np.sqrt(taus.size)
    assert (high - low) / 2 == pytest.approx(half, rel=0.15)
    assert summarise(pairs, seed=3) == summary
    assert summarise(pairs, seed=4).kendall_tau.interval != summary.kendall_tau.interval
    assert summarise(pairs, seed=3, confidence=0.5).kendall_tau.interval[1] < high


def test_rank_correlation_with_averages_per_group_spearman_like_scipy():
    rng = random.Random(11)
    ranks, values, groups, per_group = [], [], [], []
    for g in range(20):
        r = [rng.randint(1, 4) for _ in range(5)]
        v = [rng.randint(0, 9) for _ in range(5)]
        ranks += r
        values += v
        groups += [f"g{g}"] * 5
        if len(set(r)) > 1 and len(set(v)) > 1:
            per_group.append(stats.spearmanr(r, v).statistic)
    got = rank_correlation_with(ranks, values, groups, seed=1)
    assert got.n == len(per_group)
    assert got.value == pytest.approx(np.mean(per_group))
    assert got.interval[0] <= got.value <= got.interval[1]


def test_rank_correlation_with_a_covariate_that_decides_the_rank_is_one():
    # the grader ranks by shown order in both groups; the one-trajectory group is left out
    got = rank_correlation_with([1, 2, 3, 1, 2, 1], [0, 1, 2, 5, 9, 0], ["a", "a", "a", "b", "b", "c"])
    assert (got.value, got.interval, got.n) == (pytest.approx(1.0), (pytest.approx(1.0), pytest.approx(1.0)), 2)


def test_rank_correlation_with_rejects_ragged_or_missing_input():
    with pytest.raises(ValueError, match="differ in length"):
        rank_correlation_with([1, 2], [1], ["a", "a"])
    with pytest.raises(ValueError, match="finite"):
        rank_correlation_with([1, 2], [1, float("nan")], ["a", "a"])
