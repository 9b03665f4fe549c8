import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading import advantages as adv
from grading.advantages import (
    DEFAULT_PARAMS,
    EMPTY,
    LABELS,
    REASONS,
    SCHEDULES,
    describe_schedule,
    gagar_advantages,
    group_labels,
    grpo_advantages,
    redistribute,
    register_schedule,
    schedule_factors,
)
from grading.schedules import unit
from tests.grading import reference_advantages as ref

# No deadline: these run in a busy CI next to a worker fleet; speed is bench/'s job.
unhurried = settings(deadline=None)

SCHEDULE_PARAMS = {
    "linear": {"w_min": 0.3},
    "exponential": {"gamma": 0.7},
    "top_m": {"m": 2, "w_min": 0.4},
    "tiered": {"factors": [1.0, 0.6, 0.25]},
    "scores": {"temperature": 0.5},
}


def competition_ranks(values):
    """1 + how many are strictly better (higher); ties share a rank."""
    return [1 + sum(1 for other in values if other > v) for v in values]


def random_batch(rng, layout="shuffled"):
    """1..30 groups of 1..20 trajectories. ``shuffled``: some group ids unused and the
    rows in random order; ``runs``: the same in group order, sizes unequal; both take
    the general path. ``contiguous``: every id used, one size for all, in group order
    (``np.repeat(np.arange(G), k)``, the trainers' layout): the fast path."""
    n_groups = int(rng.integers(1, 31))
    used = rng.random(n_groups) < 0.9
    width = None
    if layout == "contiguous":
        used[:] = True
        width = int(rng.integers(1, 21))
    rows = []
    for gid in np.flatnonzero(used):
        size = width or int(rng.integers(1, 21))
        kind = rng.choice(["mixed", "all_pass", "all_fail"], p=[0.7, 0.15, 0.15])
        pass_rate = {"mixed": rng.random(), "all_pass": 1.0, "all_fail": 0.0}[kind]
        passed = rng.random(size) < pass_rate
        if rng.random() < 0.5:
            rewards = passed.astype(float)
        else:
            rewards = np.where(passed, rng.uniform(0.5, 1, size), rng.uniform(-1, 0.5, size))
        quality = rng.integers(0, int(rng.integers(1, 6)), size)  # few levels: many ties
        scores = quality + rng.random(size) * 0.1
        ranked = passed & (rng.random(size) < (1.0 if rng.random() < 0.8 else 0.6))
        if rng.random() < 0.1:
            ranked[:] = False
        ranks = np.zeros(size, dtype=int)
        ranks[ranked] = competition_ranks(list(quality[ranked]))
        for i in range(size):
            rows.append((gid, rewards[i], passed[i], ranks[i], scores[i], rng.random() < 0.1))
    order = rng.permutation(len(rows)) if layout == "shuffled" else range(len(rows))
    cols = list(zip(*[rows[i] for i in order], strict=True))
    return {
        "group_index": np.array(cols[0], dtype=np.int64),
        "rewards": np.array(cols[1], dtype=float),
        "passed": np.array(cols[2], dtype=bool),
        "ranks": np.array(cols[3], dtype=np.int64),
        "scores": np.array(cols[4], dtype=float),
        "flagged": np.array(cols[5], dtype=bool),
        "n_groups": n_groups,
    }


def fast_path(group_index, n_groups=None):
    return adv._Groups(group_index, n_groups).width > 0


def assert_same(actual, expected):
    np.testing.assert_allclose(actual, np.array(expected, dtype=float), rtol=1e-12, atol=1e-12)


# --- vectorised against the plain-loop reference ---------------------------------


@pytest.mark.parametrize("layout", ["shuffled", "runs", "contiguous"])
@pytest.mark.parametrize("schedule", sorted(SCHEDULE_PARAMS))
def test_it_matches_the_loop_reference_over_random_batches(schedule, layout):
    params = SCHEDULE_PARAMS[schedule]
    for seed in range(200):
        rng = np.random.default_rng(seed)
        b = random_batch(rng, layout)
        if layout == "contiguous":
            assert fast_path(b["group_index"], b["n_groups"])
        options = {
            "norm_by_std": bool(rng.random() < 0.8),
            "unbiased_std": bool(rng.random() < 0.5),
            "verl_singletons": bool(rng.random() < 0.2),
        }
        w_flag = 0.0 if rng.random() < 0.2 else float(rng.uniform(0.05, 1))
        got = gagar_advantages(
            b["rewards"], b["group_index"], b["passed"], b["ranks"], schedule=schedule,
            params=params, scores=b["scores"], flagged=b["flagged"], w_flag=w_flag,
            n_groups=b["n_groups"], **options,
        )
        base, weights, expected, reasons = ref.gagar(
            b["rewards"], b["group_index"], b["passed"], b["ranks"], schedule=schedule,
            params=params, scores=b["scores"], flagged=b["flagged"], w_flag=w_flag, **options,
        )
        assert_same(got.grpo, base)
        assert_same(got.factors, weights)
        assert_same(got.advantages, expected)
        names = got.reason_names()
        assert {gid: names[gid] for gid in reasons} == reasons
        assert all(names[gid] == "empty" for gid in set(range(b["n_groups"])) - set(reasons))
        labels = ref.group_labels(b["passed"], b["group_index"])
        assert {gid: got.label_names()[gid] for gid in labels} == labels


@pytest.mark.parametrize("layout", ["shuffled", "contiguous"])
def test_redistribute_matches_the_reference_for_non_binary_advantages(layout):
    for seed in range(200):
        rng = np.random.default_rng(seed)
        b = random_batch(rng, layout)
        a = rng.normal(size=b["rewards"].size)
        w = np.where(b["passed"] & (rng.random(a.size) < 0.97), rng.uniform(0.01, 1, a.size), np.nan)
        got = redistribute(a, b["group_index"], b["passed"], w, n_groups=b["n_groups"])
        expected, reasons = ref.redistribute(a, b["group_index"], b["passed"], w)
        assert_same(got.advantages, expected)
        assert {gid: got.reason_names()[gid] for gid in reasons} == reasons


# --- group layouts: the contiguous fast path -------------------------------------


@pytest.mark.parametrize(
    "group_index, n_groups, width",
    [
        ([0, 0, 1, 1, 2, 2], None, 2),
        ([0, 0, 1, 1, 2, 2], 3, 2),
        ([0, 1, 2], None, 1),
        ([0, 0, 0], None, 3),
        (np.array([0, 0, 1, 1], dtype=np.uint8), None, 2),
        ([], None, 0),
        ([0, 0, 1, 1], 3, 0),  # an empty group
        ([0, 0, 1, 1, 1], None, 0),  # unequal sizes
        ([0, 1, 1, 1], None, 0),
        ([0, 0, 1, 2, 2, 2], None, 0),
        ([1, 1, 0, 0], None, 0),  # groups out of order
        ([0, 1, 0, 1], None, 0),  # interleaved
        ([0, 1, 1, 0], None, 0),
        ([0, 0, 2, 2], None, 0),  # an unused id
    ],
)
def test_the_fast_path_is_taken_exactly_for_equal_groups_in_a_row(group_index, n_groups, width):
    assert adv._Groups(group_index, n_groups).width == width


@pytest.mark.parametrize("layout", ["contiguous", "shuffled"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_are_rejected_in_either_layout(layout, bad):
    b = random_batch(np.random.default_rng(3), layout)
    b["rewards"][len(b["rewards"]) // 2] = bad
    with pytest.raises(ValueError, match="finite"):
        grpo_advantages(b["rewards"], b["group_index"])
    with pytest.raises(ValueError, match="finite"):
        gagar_advantages(b["rewards"], b["group_index"], b["passed"], b["ranks"])


@pytest.mark.parametrize("schedule", sorted(SCHEDULE_PARAMS))
def test_the_fast_path_agrees_with_the_general_path(schedule):
    # One empty group more sends the same batch, in the same order, down the general path.
    for seed in range(200):
        rng = np.random.default_rng(seed)
        b = random_batch(rng, "contiguous")
        g, n = b["group_index"], b["n_groups"]
        assert fast_path(g, n) and not fast_path(g, n + 1)
        if rng.random() < 0.3:
            b["ranks"] = b["passed"].astype(np.int64)  # all tied
        options = {
            "norm_by_std": bool(rng.random() < 0.8),
            "unbiased_std": bool(rng.random() < 0.5),
            "verl_singletons": bool(rng.random() < 0.2),
        }
        fast, general = (
            gagar_advantages(
                b["rewards"], g, b["passed"], b["ranks"], schedule=schedule,
                params=SCHEDULE_PARAMS[schedule], scores=b["scores"], flagged=b["flagged"],
                w_flag=0.5, n_groups=groups, **options,
            )
            for groups in (n, n + 1)
        )
        assert_same(fast.grpo, general.grpo)
        assert_same(fast.factors, general.factors)
        assert_same(fast.advantages, general.advantages)
        assert fast.reasons.tolist() + [EMPTY] == general.reasons.tolist()
        assert fast.labels.tolist() + [EMPTY] == general.labels.tolist()
        assert_same(grpo_advantages(b["rewards"], g, **options),
                    grpo_advantages(b["rewards"], g, n_groups=n + 1, **options))
        a = rng.normal(size=g.size)
        w = np.where(b["passed"] & (rng.random(g.size) < 0.9), rng.uniform(0.01, 1, g.size), np.nan)
        moved = [redistribute(a, g, b["passed"], w, n_groups=groups) for groups in (n, n + 1)]
        assert moved[0].advantages.tobytes() == moved[1].advantages.tobytes()
        assert moved[0].reasons.tolist() + [EMPTY] == moved[1].reasons.tolist()


# --- GRPO -------------------------------------------------------------------------


@unhurried
@given(
    st.lists(st.lists(st.floats(-10, 10), min_size=1, max_size=12), min_size=1, max_size=8),
    st.booleans(),
)
def test_grpo_uses_sample_or_population_std_like_numpy(groups, unbiased):
    rewards = np.concatenate([np.array(g) for g in groups])
    group_index = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    got = grpo_advantages(rewards, group_index, unbiased_std=unbiased)
    dr = grpo_advantages(rewards, group_index, norm_by_std=False)
    for gid, g in enumerate(groups):
        g = np.array(g)
        ddof = 1 if unbiased else 0
        std = np.std(g, ddof=ddof) if g.size > ddof else 0.0
        np.testing.assert_allclose(dr[group_index == gid], g - g.mean(), atol=1e-12)
        np.testing.assert_allclose(
            got[group_index == gid], (g - g.mean()) / (std + 1e-6), rtol=1e-9, atol=1e-9
        )


def test_dr_grpo_skips_the_std_division():
    rewards = np.array([1.0, 0.0, 0.0, 0.0])
    group_index = np.zeros(4, dtype=int)
    assert grpo_advantages(rewards, group_index, norm_by_std=False).tolist() == [
        0.75, -0.25, -0.25, -0.25,
    ]
    normed = grpo_advantages(rewards, group_index)
    assert normed[0] == pytest.approx(0.75 / (0.5 + 1e-6))


def test_singleton_all_pass_and_all_fail_groups_get_zero_advantage_and_their_label():
    rewards = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    group_index = np.array([0, 0, 1, 1, 2, 2, 3, 4])
    passed = rewards == 1
    for unbiased in (True, False):
        got = grpo_advantages(rewards, group_index, unbiased_std=unbiased)
        assert got[[0, 1, 2, 3, 6, 7]].tolist() == [0.0] * 6
    labels = group_labels(passed, group_index, n_groups=6)
    assert [LABELS[c] if c != EMPTY else "empty" for c in labels] == [
        "all_pass", "all_fail", "mixed", "singleton", "singleton", "empty",
    ]


def test_verl_singletons_reproduces_verls_mean_zero_std_one():
    rewards = np.array([1.0, 0.5, 0.0])
    group_index = np.array([0, 1, 1])
    got = grpo_advantages(rewards, group_index, verl_singletons=True)
    assert got[0] == 1.0 / (1.0 + 1e-6)
    assert grpo_advantages(rewards, group_index, norm_by_std=False, verl_singletons=True)[0] == 1.0
    assert got[1:].tolist() == grpo_advantages(rewards, group_index)[1:].tolist()


def test_it_rejects_bad_group_index_and_rewards():
    with pytest.raises(ValueError, match="integer"):
        grpo_advantages([1.0], [0.5])
    with pytest.raises(ValueError, match=">= 0"):
        grpo_advantages([1.0], [-1])
    with pytest.raises(ValueError, match="beyond n_groups"):
        grpo_advantages([1.0, 0.0], [0, 3], n_groups=2)
    with pytest.raises(ValueError, match="finite"):
        grpo_advantages([math.nan], [0])
    with pytest.raises(ValueError, match="shape"):
        grpo_advantages([1.0, 0.0], [0])


def test_empty_batch_gives_empty_results():
    r = gagar_advantages([], [], np.array([], bool), [], n_groups=2)
    assert r.advantages.size == 0 and r.reason_names() == ("empty", "empty")


# --- schedules --------------------------------------------------------------------


def factors(schedule, ranks, **kw):
    return schedule_factors(schedule, ranks=np.array(ranks), group_index=np.zeros(len(ranks), int), **kw)


def test_ties_share_mean_factor_of_positions_they_span():
    # m = 5: positions 1..5 -> 1, .8, .6, .4, .2 ; the tie at 2 spans 2..4
    got = factors("linear", [1, 2, 2, 2, 5], w_min=0.2)
    np.testing.assert_allclose(got, [1.0, 0.6, 0.6, 0.6, 0.2], rtol=1e-15)


def test_exponential_tie_gets_mean_of_geometric_run():
    got = factors("exponential", [1, 2, 2, 4], gamma=0.5)
    np.testing.assert_allclose(got, [1.0, 0.375, 0.375, 0.125], rtol=1e-15)
    near_one = factors("exponential", [1, 1, 1, 1], gamma=1 - 1e-9)
    np.testing.assert_allclose(near_one, [1 - 1.5e-9] * 4, rtol=1e-15)


def test_top_m_tie_straddling_m_mixes_full_and_floor_weights():
    got = factors("top_m", [1, 2, 2, 2, 5], m=2, w_min=0.1)
    np.testing.assert_allclose(got, [1.0, 0.4, 0.4, 0.4, 0.1], rtol=1e-15)


def test_tiered_uses_dense_rank_and_repeats_the_last_tier():
    got = factors("tiered", [1, 1, 3, 4, 5, 0], factors=[1.0, 0.5, 0.3])
    assert got[:5].tolist() == [1.0, 1.0, 0.5, 0.3, 0.3] and math.isnan(got[5])


def test_scores_schedule_weighs_by_score_gap_to_the_best():
    got = factors("scores", [1, 2, 3, 0], scores=np.array([2.0, 1.0, 0.0, 9.0]), temperature=2.0)
    np.testing.assert_allclose(got[:3], [1.0, math.exp(-0.5), math.exp(-1.0)], rtol=1e-15)
    assert math.isnan(got[3])
    with pytest.raises(ValueError, match="scores"):
        factors("scores", [1, 2])


def test_single_ranked_trajectory_gets_full_weight():
    assert factors("linear", [0, 1, 0]).tolist()[1] == 1.0


def test_flag_caps_the_factor_at_w_flag():
    got = factors("linear", [1, 2, 3, 0], w_min=0.5, flagged=np.array([True, False, True, True]),
                  w_flag=0.6)
    assert got[:3].tolist() == [0.6, 0.75, 0.5] and math.isnan(got[3])
    with pytest.raises(ValueError, match="w_flag"):
        factors("linear", [1, 2], flagged=np.array([True, False]))
    with pytest.raises(ValueError, match=r"w_flag must be in \[0, 1\]"):
        factors("linear", [1, 2], flagged=np.array([True, False]), w_flag=-0.1)
    assert factors("linear", [1, 2], flagged=np.array([True, False]), w_flag=0.0).tolist() == [0.0, 0.5]


def test_flag_cap_of_zero_gives_the_flagged_no_share_and_keeps_the_sum():
    # group 0: a > b > c all pass, a flagged; group 1: both passes flagged, nothing to share by.
    rewards = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    group_index = [0, 0, 0, 0, 1, 1, 1]
    passed = [True, True, True, False, True, True, False]
    ranks = [1, 2, 3, 0, 1, 2, 0]
    flagged = np.array([True, False, False, False, True, True, False])
    r = gagar_advantages(rewards, group_index, passed, ranks, schedule="linear", params={"w_min": 0.5},
                         flagged=flagged, w_flag=0.0)
    assert r.factors[[0, 4, 5]].tolist() == [0.0, 0.0, 0.0]
    assert r.advantages[0] == 0.0 and r.advantages[1] > r.advantages[2] > 0
    assert r.advantages[:3].sum() == pytest.approx(r.grpo[:3].sum(), rel=1e-12)
    assert r.advantages[3] == r.grpo[3]
    assert r.reason_names() == ("redistributed", "equal_factors")
    assert r.advantages[4:].tobytes() == r.grpo[4:].tobytes()


@pytest.mark.parametrize(
    "ranks, message",
    [
        ([1, 1, 2], "competition ranks"),
        ([1, 3, 3, 3], "competition ranks"),
        ([2, 2], "competition ranks"),
        ([1, 3], "competition ranks"),
        ([3], "competition ranks"),
        ([1.5, 1], "whole numbers"),
        ([np.inf, 1], "whole numbers"),
        ([-1, 1], ">= 0"),
    ],
)
def test_it_rejects_rankings_that_are_not_competition_ranks(ranks, message):
    with pytest.raises(ValueError, match=message):
        factors("linear", ranks)


def test_a_rank_beyond_its_group_is_rejected_even_where_the_next_group_has_room():
    with pytest.raises(ValueError, match="competition ranks"):
        schedule_factors("linear", ranks=np.array([2, 1]), group_index=np.array([0, 1]))


def test_a_huge_rank_is_rejected_without_allocating_for_it():
    with pytest.raises(ValueError, match="competition ranks"):
        factors("linear", [1, 10**15])


def test_ranks_are_checked_per_group_in_any_order():
    got = schedule_factors("linear", ranks=np.array([2, 1, 1, 1, 0]),
                           group_index=np.array([1, 0, 1, 2, 0]), w_min=0.5)
    assert got[:4].tolist() == [0.5, 1.0, 1.0, 1.0]


def test_only_passing_trajectories_can_be_ranked():
    with pytest.raises(ValueError, match="only passing"):
        gagar_advantages([1.0, 0.0], [0, 0], np.array([True, False]), [1, 2])


# --- registry ---------------------------------------------------------------------


def test_unknown_schedule_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown schedule 'cubic'; known: \['exponential'"):
        factors("cubic", [1])


def test_duplicate_registration_is_rejected():
    with pytest.raises(ValueError, match="'linear' is already registered"):
        register_schedule("linear", w_min=unit)


@pytest.mark.parametrize(
    "schedule, params, message",
    [
        ("linear", {"w_min": 0.0}, r"'linear': w_min must be in \(0, 1\], got 0.0"),
        ("linear", {"w_min": 1.5}, r"w_min must be in \(0, 1\]"),
        ("linear", {"w_min": math.nan}, r"w_min must be in \(0, 1\]"),
        ("linear", {"w_min": "0.5"}, "w_min must be a number"),
        ("linear", {"gamma": 0.5}, r"unknown \['gamma'\].*parameters are \['w_min'\]"),
        ("exponential", {"gamma": 0.0}, r"gamma must be in \(0, 1\]"),
        ("top_m", {}, r"missing \['m'\]"),
        ("top_m", {"m": 0}, "m must be an integer >= 1"),
        ("top_m", {"m": True}, "m must be an integer >= 1"),
        ("tiered", {"factors": []}, "non-empty sequence"),
        ("tiered", {"factors": [0.5, 1.0]}, "non-increasing"),
        ("tiered", {"factors": [1.0, 0.0]}, r"factors must be in \(0, 1\]"),
        ("scores", {"temperature": 0}, "temperature must be a finite number > 0"),
    ],
)
def test_bad_parameters_are_rejected_with_a_clear_message(schedule, params, message):
    with pytest.raises(ValueError, match=message):
        describe_schedule(schedule, params)
    with pytest.raises(ValueError, match=message):
        factors(schedule, [1, 2], scores=np.zeros(2), **params)


def test_describe_schedule_is_canonical_and_reproduces_the_factors():
    config = describe_schedule("top_m", {"w_min": 1, "m": np.int64(2)})
    assert config == {"name": "top_m", "params": {"m": 2, "w_min": 1.0}}
    assert list(config["params"]) == ["m", "w_min"]
    assert type(config["params"]["m"]) is int
    assert describe_schedule("linear") == {"name": "linear", "params": DEFAULT_PARAMS["linear"]}
    ranks = [1, 2, 2, 4]
    assert factors(config["name"], ranks, **config["params"]).tolist() == factors(
        "top_m", ranks, m=2, w_min=1.0).tolist()


def test_every_schedule_has_default_params_listed():
    assert set(DEFAULT_PARAMS) == set(SCHEDULES)
    assert DEFAULT_PARAMS["top_m"] == {"w_min": 0.5}


def test_a_registered_schedule_is_usable_by_name():
    @register_schedule("flat_test", level=unit)
    def _flat(ranking, *, level=0.5):
        return np.full(ranking.index.size, level)

    try:
        assert factors("flat_test", [1, 2, 0], level=0.25).tolist()[:2] == [0.25, 0.25]
    finally:
        del SCHEDULES["flat_test"], DEFAULT_PARAMS["flat_test"]


def test_registration_needs_a_check_per_parameter():
    with pytest.raises(ValueError, match=r"checks must cover exactly \['level'\]"):
        register_schedule("broken_test")(lambda ranking, *, level=0.5: None)
    assert "broken_test" not in SCHEDULES


# --- redistribution: edge cases ---------------------------------------------------


def test_unchanged_groups_say_why_and_keep_their_advantages_bit_identical():
    a = np.array([0.7, 0.7, -1.4, 0.7, -0.7, 0.5, 0.5, -1.0, 0.0, 0.0, 0.3, 0.3, -0.6])
    g = np.array([0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4])
    passed = np.array([1, 1, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0], dtype=bool)
    w = np.array([1, np.nan, np.nan, 1, np.nan, 0.4, 0.4, np.nan, np.nan, np.nan, 1, 0.5, np.nan])
    got = redistribute(a, g, passed, w, n_groups=6)
    assert got.reason_names() == (
        "no_ranking", "single_pass", "equal_factors", "nonpositive_sum", "redistributed", "empty",
    )
    assert got.advantages[:10].tobytes() == a[:10].tobytes()
    np.testing.assert_allclose(got.advantages[10:], [0.4, 0.2, -0.6], rtol=1e-15)


def test_passing_trajectories_with_nonpositive_advantage_are_left_out_of_j():
    # non-binary rewards: the 0.6 pass sits below its group's mean
    a = np.array([0.9, 0.5, -0.2, -1.2])
    passed = np.array([True, True, True, False])
    got = redistribute(a, np.zeros(4, int), passed, np.array([0.5, 1.0, 1.0, np.nan]))
    assert got.advantages[2:].tolist() == [-0.2, -1.2]
    assert got.advantages[:2].sum() == pytest.approx(1.4, rel=1e-15)


def test_it_rejects_factors_outside_the_unit_interval():
    with pytest.raises(ValueError, match=r"factors must be in \[0, 1\]"):
        redistribute([1.0, -1.0], [0, 0], np.array([True, False]), [1.5, np.nan])


def test_module_doctest_runs():
    assert doctest.testmod(adv).failed == 0


# --- properties: the invariants the redistribution keeps ----------------------------------------


@st.composite
def batches(draw, *, binary=True, ranked=st.floats(0.0, 1.0)):
    """Groups of binary (or non-binary) rewards with competition-ranked passes: either
    shuffled groups of any size, or groups of one size in a row (the fast path)."""
    n_groups = draw(st.integers(1, 6))
    width = draw(st.none() | st.integers(1, 10))
    rows = []
    for gid in range(n_groups):
        size = width or draw(st.integers(1, 10))
        passed = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        if binary:
            rewards = [float(p) for p in passed]
        else:
            rewards = [draw(st.floats(0.5, 1.0) if p else st.floats(-1.0, 0.49)) for p in passed]
        quality = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
        p_rank = draw(ranked)
        ranked_mask = [p and draw(st.floats(0, 1)) < p_rank for p in passed]
        if p_rank == 1.0:
            ranked_mask = passed
        ranks = [0] * size
        idx = [i for i in range(size) if ranked_mask[i]]
        for i, r in zip(idx, competition_ranks([quality[i] for i in idx]), strict=True):
            ranks[i] = r
        rows += [(gid, rewards[i], passed[i], ranks[i]) for i in range(size)]
    order = range(len(rows)) if width else draw(st.permutations(range(len(rows))))
    cols = list(zip(*[rows[i] for i in order], strict=True))
    return {
        "group_index": np.array(cols[0], dtype=np.int64),
        "rewards": np.array(cols[1]),
        "passed": np.array(cols[2], dtype=bool),
        "ranks": np.array(cols[3], dtype=np.int64),
    }


positional = st.sampled_from([
    ("linear", {"w_min": 0.1}), ("linear", {"w_min": 1.0}), ("exponential", {"gamma": 0.5}),
    ("top_m", {"m": 1, "w_min": 0.3}), ("tiered", {"factors": [1.0, 0.7, 0.2]}),
])


def run(b, schedule_params, **kw):
    schedule, params = schedule_params
    return gagar_advantages(b["rewards"], b["group_index"], b["passed"], b["ranks"],
                            schedule=schedule, params=params, **kw)


@unhurried
@given(batches(binary=False), positional, st.one_of(st.just(0.0), st.floats(0.0, 1.0)))
def test_passing_sum_and_failing_advantages_are_preserved(b, schedule_params, w_flag):
    flagged = b["ranks"] % 2 == 0
    r = run(b, schedule_params, flagged=flagged, w_flag=w_flag)
    fail = ~b["passed"]
    assert r.advantages[fail].tobytes() == r.grpo[fail].tobytes()
    for gid in np.unique(b["group_index"]):
        p = b["passed"] & (b["group_index"] == gid)
        before, after = r.grpo[p].sum(), r.advantages[p].sum()
        assert after == pytest.approx(before, rel=1e-9, abs=1e-12)


@unhurried
@given(batches(ranked=st.just(1.0)), positional)
def test_advantage_is_non_increasing_in_rank(b, schedule_params):
    r = run(b, schedule_params)
    for gid in np.unique(b["group_index"]):
        ranked = np.flatnonzero((b["group_index"] == gid) & (b["ranks"] > 0))
        order = ranked[np.argsort(b["ranks"][ranked], kind="stable")]
        steps = np.diff(r.advantages[order])
        assert np.all(steps <= 1e-12 * np.abs(r.advantages[order]).max(initial=1))


@unhurried
@given(batches(), positional)
def test_factors_are_in_unit_interval_for_ranked_and_nan_otherwise(b, schedule_params):
    r = run(b, schedule_params)
    ranked = b["ranks"] > 0
    assert np.all((r.factors[ranked] > 0) & (r.factors[ranked] <= 1))
    assert np.all(np.isnan(r.factors[~ranked]))


@unhurried
@given(batches(ranked=st.just(1.0)), positional)
def test_all_tied_ranking_is_the_identity(b, schedule_params):
    b["ranks"] = b["passed"].astype(np.int64)
    r = run(b, schedule_params)
    assert r.advantages.tobytes() == r.grpo.tobytes()
    for gid, reason in enumerate(r.reason_names()):
        if np.sum(b["passed"] & (b["group_index"] == gid) & (r.grpo > 0)) >= 2:
            assert reason == "equal_factors"


@unhurried
@given(batches(), positional)
def test_groups_left_unchanged_carry_the_right_reason(b, schedule_params):
    r = run(b, schedule_params)
    for gid, reason in enumerate(r.reason_names()):
        members = b["group_index"] == gid
        p = b["passed"] & members
        j = p & (r.grpo > 0)
        if np.any(p & (b["ranks"] == 0)):
            expected = "no_ranking"
        elif j.sum() == 0:
            expected = "nonpositive_sum"
        elif j.sum() == 1:
            expected = "single_pass"
        else:
            expected = reason
            assert reason in ("redistributed", "equal_factors")
        assert reason == expected
        if reason != "redistributed":
            assert r.advantages[members].tobytes() == r.grpo[members].tobytes()


@unhurried
@given(batches())
def test_singleton_and_uniform_groups_get_zero_advantage_and_their_label(b):
    r = run(b, ("linear", {}))
    for gid, label in enumerate(r.label_names()):
        members = b["group_index"] == gid
        p = b["passed"][members]
        expected = ("singleton" if members.sum() == 1 else "all_pass" if p.all()
                    else "all_fail" if not p.any() else "mixed")
        assert label == expected
        if label != "mixed":
            assert np.all(r.advantages[members] == 0.0)
            assert r.reason_names()[gid] in ("nonpositive_sum", "no_ranking")


@settings(max_examples=50, deadline=None)
@given(batches(), st.booleans())
def test_reason_and_label_codes_index_their_name_tuples(b, unbiased):
    r = run(b, ("linear", {}), unbiased_std=unbiased)
    assert r.labels.dtype == np.int8 and r.reasons.dtype == np.int8
    assert all(LABELS[c] == n for c, n in zip(r.labels, r.label_names(), strict=True))
    assert all(REASONS[c] == n for c, n in zip(r.reasons, r.reason_names(), strict=True))


def test_a_trajectory_not_ranked_may_be_none_nan_or_zero_alike():
    """What a user passes for a failing trajectory: None in a list, NaN from pandas, or 0."""
    rewards, groups, passed = [1.0, 1.0, 0.0, 1.0], [0, 0, 0, 0], [True, True, False, True]
    zero = gagar_advantages(rewards, groups, passed, [1, 2, 0, 3]).advantages
    for unranked in ([1, 2, None, 3], np.array([1, 2, np.nan, 3]), [1.0, 2.0, float("nan"), 3.0]):
        np.testing.assert_array_equal(gagar_advantages(rewards, groups, passed, unranked).advantages, zero)
    with pytest.raises(ValueError, match="numbers, or None"):
        gagar_advantages(rewards, groups, passed, [1, 2, "x", 3])
    with pytest.raises(ValueError, match="whole numbers"):
        gagar_advantages(rewards, groups, passed, [1, 2, 0, 2.5])
