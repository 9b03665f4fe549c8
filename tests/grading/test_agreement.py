import doctest
import itertools
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grading.agreement
from grading.agreement import (
    Move,
    bootstrap_interval,
    kendall_tau,
    pairwise_accuracy,
    ranking_diff,
    summarise,
    top1_agreement,
)


def test_doctests_run():
    assert doctest.testmod(grading.agreement, optionflags=doctest.ELLIPSIS).failed == 0


def test_identical_rankings_agree_fully():
    tiers = [["a"], ["b", "c"], ["d"]]
    assert kendall_tau(tiers, tiers) == pytest.approx(1.0)
    assert pairwise_accuracy(reference=tiers, predicted=tiers) == 1.0
    assert top1_agreement(reference=tiers, predicted=tiers) is True


def test_reversed_rankings_disagree_fully():
    assert kendall_tau([["a"], ["b"], ["c"]], [["c"], ["b"], ["a"]]) == pytest.approx(-1.0)
    assert pairwise_accuracy(reference=[["a"], ["b"], ["c"]], predicted=[["c"], ["b"], ["a"]]) == 0.0


def tau_b_reference(x, y):
    """Textbook tau-b on numeric scores (lower = better)."""
    n = len(x)
    conc = disc = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(n), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif dx * dy > 0:
            conc += 1
        else:
            disc += 1
    denom = ((conc + disc + ties_x) * (conc + disc + ties_y)) ** 0.5
    return (conc - disc) / denom if denom else None


def as_tiers(scores, items):
    return [[i for i, s in zip(items, scores, strict=True) if s == level] for level in sorted(set(scores))]


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=8))
def test_kendall_tau_matches_the_textbook_tau_b_with_ties(scored):
    items = [f"t{i}" for i in range(len(scored))]
    x, y = [s[0] for s in scored], [s[1] for s in scored]
    expected = tau_b_reference(x, y)
    got = kendall_tau(as_tiers(x, items), as_tiers(y, items))
    if expected is None or (len(set(x)) == 1 or len(set(y)) == 1):
        assert got is None
    else:
        assert got == pytest.approx(expected)


def test_kendall_tau_is_undefined_when_one_side_ties_everything():
    assert kendall_tau([["a", "b", "c"]], [["a"], ["b"], ["c"]]) is None
    assert kendall_tau([["a"]], [["a"]]) is None


def test_only_common_items_are_compared():
    assert kendall_tau([["a"], ["b"], ["x"]], [["a"], ["b"], ["y"]]) == pytest.approx(1.0)


def test_a_predicted_tie_counts_half_a_pair():
    assert pairwise_accuracy(reference=[["a"], ["b"]], predicted=[["a", "b"]]) == 0.5
    assert pairwise_accuracy(reference=[["a", "b"]], predicted=[["a"], ["b"]]) is None


def test_top1_agrees_when_the_best_tiers_overlap():
    assert top1_agreement(reference=[["a", "b"], ["c"]], predicted=[["b"], ["a", "c"]]) is True
    assert top1_agreement(reference=[["a"], ["b"]], predicted=[["b"], ["a"]]) is False


def test_bootstrap_interval_contains_the_mean_and_narrows_with_more_data():
    rng = random.Random(1)
    small = [rng.random() for _ in range(20)]
    large = [rng.random() for _ in range(2000)]
    low_s, high_s = bootstrap_interval(small)
    low_l, high_l = bootstrap_interval(large)
    assert low_s <= np.mean(small) <= high_s
    assert low_l <= np.mean(large) <= high_l
    assert high_l - low_l < high_s - low_s
    assert bootstrap_interval([]) is None


def test_bootstrap_interval_is_reproducible_with_a_seed():
    values = [0.1, 0.5, 0.9, 0.3]
    assert bootstrap_interval(values, seed=3) == bootstrap_interval(values, seed=3)


def test_summarise_skips_groups_where_a_measure_is_undefined():
    pairs = [([["a"], ["b"]], [["a"], ["b"]]), ([["a", "b"]], [["a"], ["b"]]), ([["a"], ["b"]], [["b"], ["a"]])]
    summary = summarise(pairs)
    assert summary.kendall_tau.n == 2 and summary.kendall_tau.value == pytest.approx(0.0)
    assert summary.pairwise_accuracy.n == 2 and summary.pairwise_accuracy.value == 0.5
    assert summary.top1.n == 3 and summary.top1.value == pytest.approx(2 / 3)
    assert summarise([]).top1.value is None


def test_ranking_diff_reports_moves_and_dropped_items():
    moves = ranking_diff([["a"], ["b"], ["c"]], [["b"], ["a"]])
    assert moves == [Move("b", 2, 1), Move("a", 1, 2), Move("c", 3, None)]
    assert [m.change for m in moves] == [1, -1, None]
