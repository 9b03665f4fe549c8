"""Agreement among several annotators who ranked the same groups (k-way overlap)."""

import random

import krippendorff
import numpy as np
import pytest
from scipy import stats

from grading.agreement import (
    average_ranks,
    kendall_tau,
    kendalls_w,
    krippendorff_alpha_ordinal,
    mean_pairwise_tau,
    positions,
)
from tests.grading.random_rankings import random_tiers


@pytest.mark.parametrize("seed", range(40))
def test_kendalls_w_matches_scipys_tie_corrected_friedman_statistic(seed):
    # Friedman's chi-square with the tie correction is m (n - 1) W
    rng = random.Random(seed)
    items = "abcdefg"[:rng.randint(3, 7)]
    rankings = [random_tiers(rng, items) for _ in range(rng.randint(2, 6))]
    if all(len(tiers) == 1 for tiers in rankings):
        assert kendalls_w(rankings) is None
        return
    by_item = [[positions(tiers)[item] for tiers in rankings] for item in items]
    chi_square = stats.friedmanchisquare(*by_item).statistic
    assert kendalls_w(rankings) == pytest.approx(chi_square / (len(rankings) * (len(items) - 1)))


def test_kendalls_w_with_a_tie_by_hand():
    # rank sums 2, 4.5, 5.5 around 4: S = 6.5; ties: one pair, 2^3 - 2 = 6; 12 S / (4 * 24 - 2 * 6)
    assert kendalls_w([[["a"], ["b"], ["c"]], [["a"], ["b", "c"]]]) == pytest.approx(78 / 84)


def test_kendalls_w_is_one_for_identical_rankings_and_zero_for_two_reversed():
    assert kendalls_w([[["a"], ["b"], ["c"]]] * 3) == pytest.approx(1.0)
    assert kendalls_w([[["a"], ["b"], ["c"]], [["c"], ["b"], ["a"]]]) == pytest.approx(0.0)


def test_kendalls_w_is_undefined_for_one_ranking_one_item_or_all_tied():
    assert kendalls_w([[["a"], ["b"]]]) is None
    assert kendalls_w([[["a"]], [["a"]]]) is None
    assert kendalls_w([[["a", "b", "c"]], [["c", "b", "a"]]]) is None
    assert kendalls_w([]) is None


def test_kendalls_w_uses_the_items_every_ranking_contains():
    assert kendalls_w([[["a"], ["x"], ["b"]], [["a"], ["b"], ["y"]]]) == pytest.approx(1.0)


def test_mean_pairwise_tau_averages_the_defined_pairs():
    a, b, c = [["a"], ["b"], ["c"]], [["a"], ["c"], ["b"]], [["a", "b", "c"]]
    assert mean_pairwise_tau([a, b, c]) == pytest.approx(kendall_tau(a, b))  # pairs with c are undefined
    assert mean_pairwise_tau([a, a, b]) == pytest.approx((1 + 2 * kendall_tau(a, b)) / 3)
    assert mean_pairwise_tau([a]) is None
    assert mean_pairwise_tau([c, c]) is None


def reliability_matrix(groups, raters):
    """The krippendorff package's input: raters x units of average ranks, NaN where missing."""
    units = sorted({(g, item) for g, by_rater in enumerate(groups) for tiers in by_rater.values()
                    for tier in tiers for item in tier})
    matrix = np.full((len(raters), len(units)), np.nan)
    for g, by_rater in enumerate(groups):
        for r, rater in enumerate(raters):
            if rater not in by_rater:
                continue
            found = positions(by_rater[rater])
            items = sorted(found)
            for item, rank in zip(items, average_ranks([found[i] for i in items]), strict=True):
                matrix[r, units.index((g, item))] = rank
    return matrix


@pytest.mark.parametrize("seed", range(40))
def test_krippendorff_alpha_matches_the_krippendorff_package(seed):
    rng = random.Random(seed)
    raters = ["ann", "bob", "cid", "dee"][:rng.randint(2, 4)]
    groups = []
    for g in range(rng.randint(1, 6)):
        items = [f"g{g}t{i}" for i in range(rng.randint(2, 5))]
        # a rater may skip a group or rank only some of its trajectories: missing values
        groups.append({rater: random_tiers(rng, rng.sample(items, rng.randint(1, len(items))))
                       for rater in raters if rng.random() < 0.85})
    got = krippendorff_alpha_ordinal(groups)
    matrix = reliability_matrix(groups, raters)
    pairable = (~np.isnan(matrix)).sum(axis=0) > 1
    if not pairable.any() or np.unique(matrix[:, pairable][~np.isnan(matrix[:, pairable])]).size < 2:
        assert got is None
        return
    assert got == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal"))


def test_krippendorff_alpha_is_one_when_raters_agree_and_undefined_without_pairs_or_spread():
    same = [["a"], ["b", "c"]]
    assert krippendorff_alpha_ordinal([{"ann": same, "bob": same}]) == pytest.approx(1.0)
    assert krippendorff_alpha_ordinal([{"ann": same}]) is None
    assert krippendorff_alpha_ordinal([{"ann": [["a", "b"]], "bob": [["a", "b"]]}]) is None
    assert krippendorff_alpha_ordinal([]) is None
