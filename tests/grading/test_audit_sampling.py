"""Audit sets: exact, reproducible quotas and the size for a target interval."""

import doctest
import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import grading.audit_sampling
from grading.audit_sampling import (
    EVERYTHING,
    STRATA,
    UNKNOWN,
    AuditCandidate,
    quotas,
    sample_audit_set,
    size_for_interval,
)


def test_doctests_run():
    assert doctest.testmod(grading.audit_sampling).failed == 0


def candidates(count, seed=0, missing_every=7):
    rng = random.Random(seed)
    return [AuditCandidate(f"g{i:03}", {
        "confidence": None if i % missing_every == 0 else round(rng.random(), 2),
        "pass_rate": rng.choice([0.0, 0.25, 0.5, 1.0]),
    }) for i in range(count)]


@pytest.mark.parametrize(("half_width", "kwargs", "expected"), [
    (0.05, {}, 385),
    (0.05, {"population": 1000}, 278),
    (0.03, {}, 1068),
    (0.1, {"confidence": 0.9}, 68),
    (0.05, {"p": 0.1}, 139),
    (0.05, {"population": 50}, 45),
    (0.5, {"population": 1}, 1),
])
def test_size_for_interval_gives_the_textbook_sizes(half_width, kwargs, expected):
    assert size_for_interval(half_width, **kwargs) == expected


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"half_width": 0}, "half_width"),
    ({"half_width": 0.05, "confidence": 1}, "confidence"),
    ({"half_width": 0.05, "p": 0}, "p must"),
    ({"half_width": 0.05, "population": 0}, "population"),
])
def test_size_for_interval_rejects_impossible_targets(kwargs, message):
    with pytest.raises(ValueError, match=message):
        size_for_interval(**kwargs)


def test_quotas_by_largest_remainder_by_hand():
    got = quotas(candidates(40), size=10, stratify_by="confidence")
    # shares of 10 over strata of 9, 8, 7, 10 and 6 unknown: 2.25, 2, 1.75, 2.5, 1.5; whole parts sum to 8,
    # the two spare go to .75 and to the earlier of the two .5
    assert [(s.population, s.quota) for s in got] == [(9, 2), (8, 2), (7, 2), (10, 3), (6, 1)]
    assert got[-1].label == UNKNOWN and got[-1].keys == ("g000", "g007", "g014", "g021", "g028", "g035")
    assert [s.label for s in got[:-1]] == [f"{s.low:g} to {s.high:g}" for s in got[:-1]]
    assert all(a.high < b.low for a, b in zip(got[:-2], got[1:-1], strict=True))


@given(st.integers(1, 60), st.integers(0, 10_000), st.integers(1, 6), st.sampled_from(STRATA))
def test_quotas_sum_to_the_size_and_stay_within_one_of_the_proportional_share(count, seed, bins, feature):
    rng = random.Random(seed)
    pool = [AuditCandidate(f"k{i}", {feature: rng.choice([None, rng.randint(0, 5), rng.random()])})
            for i in range(count)]
    size = rng.randint(1, count)
    got = quotas(pool, size=size, stratify_by=feature, bins=bins)
    assert sum(s.quota for s in got) == size
    assert sum(s.population for s in got) == count
    for s in got:
        share = Fraction(size * s.population, count)
        assert share - 1 < s.quota < share + 1 and s.quota <= s.population
    assert len([s for s in got if s.label != UNKNOWN]) <= bins


@pytest.mark.parametrize("feature", [None, "confidence", "pass_rate"])
def test_the_draw_meets_each_quota_exactly(feature):
    pool = candidates(40)
    drawn = set(sample_audit_set(pool, size=13, stratify_by=feature, seed=5))
    assert len(drawn) == 13
    for stratum in quotas(pool, size=13, stratify_by=feature):
        assert len(drawn & set(stratum.keys)) == stratum.quota


def test_the_draw_is_reproducible_and_ignores_the_input_order():
    pool = candidates(40)
    first = sample_audit_set(pool, size=10, stratify_by="confidence", seed=3)
    assert first == sorted(first)
    assert sample_audit_set(pool[::-1], size=10, stratify_by="confidence", seed=3) == first
    assert sample_audit_set(random.Random(1).sample(pool, 40), size=10, stratify_by="confidence", seed=3) == first
    assert sample_audit_set(pool, size=10, stratify_by="confidence", seed=4) != first


def test_a_larger_audit_keeps_the_groups_of_a_smaller_one():
    pool = candidates(40)
    smaller = set(sample_audit_set(pool, size=8, stratify_by=None, seed=9))
    assert smaller < set(sample_audit_set(pool, size=20, stratify_by=None, seed=9))


def test_a_uniform_draw_picks_every_group_equally_often():
    pool = candidates(20)
    picks = Counter(key for seed in range(2000) for key in sample_audit_set(pool, size=5, stratify_by=None, seed=seed))
    assert set(picks) == {c.group_key for c in pool}
    assert all(400 < n < 600 for n in picks.values())  # 500 expected; sd about 19


def test_a_uniform_draw_has_one_stratum():
    assert [(s.label, s.population, s.quota) for s in quotas(candidates(12), size=4, stratify_by=None)] == [
        (EVERYTHING, 12, 4)]


def test_equal_values_share_a_stratum():
    pool = [AuditCandidate(f"g{i}", {"pass_rate": 0.0 if i < 6 else 1.0}) for i in range(8)]
    got = quotas(pool, size=4, stratify_by="pass_rate", bins=4)
    assert [(s.low, s.high, s.population, s.quota) for s in got] == [(0.0, 0.0, 6, 3), (1.0, 1.0, 2, 1)]


def test_a_missing_feature_puts_the_group_in_unknown():
    pool = [AuditCandidate("a", {"margin": 0.5}), AuditCandidate("b", {}), AuditCandidate("c", {"margin": None})]
    got = quotas(pool, size=3, stratify_by="margin")
    assert [(s.label, s.keys) for s in got] == [("0.5 to 0.5", ("a",)), (UNKNOWN, ("b", "c"))]


@pytest.mark.parametrize(("pool", "kwargs", "message"), [
    (candidates(5), {"size": 6, "stratify_by": None}, "asked for 6 groups but there are only 5 candidates"),
    (candidates(5), {"size": 0, "stratify_by": None}, "size must be at least 1"),
    (candidates(5), {"size": 2, "stratify_by": "vibes"}, "unknown stratum 'vibes': choose one of confidence"),
    (candidates(5), {"size": 2, "stratify_by": "margin", "bins": 0}, "bins must be at least 1"),
    (candidates(3) + candidates(2), {"size": 2, "stratify_by": None}, "more than once: g000, g001"),
    ([AuditCandidate("x", {"margin": float("nan")})], {"size": 1, "stratify_by": "margin"},
     "group x: margin is nan"),
])
def test_bad_requests_fail_with_a_clear_message(pool, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sample_audit_set(pool, seed=0, **kwargs)
