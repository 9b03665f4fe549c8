"""The grader evaluation: the proxy, per-group measures, the group rule and the baselines."""

import random

import pytest
from scipy.stats import kendalltau

from grading.agreement import kendall_tau, top1_share
from grading.cases import GroupCase, TrajectoryCase
from grading.evaluation import (
    PROXY_LABEL,
    RANDOM,
    ReferenceGroup,
    changed_lines,
    evaluate,
    format_table,
    proxy_quality,
    random_order,
    shortest_first,
)


def diff(path, removed, added):
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(removed)} +1,{len(added)} @@\n"
            + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added))


REF = diff("m.py", ["x = 1"], ["x = 2"])


def group(group_id, *patches, reference=REF):
    trajectories = tuple(TrajectoryCase(f"t{i}", True, 1.0, p) for i, p in enumerate(patches, start=1))
    return ReferenceGroup(GroupCase(group_id, "Fix it", trajectories + (TrajectoryCase("f", False, 0.0, ""),)),
                          reference)


def test_changed_lines_keep_the_sign_strip_whitespace_and_skip_file_headers():
    assert changed_lines(diff("m.py", ["  x = 1  "], ["x = 2"])) == ["-  x = 1", "+x = 2"]


def test_the_proxy_is_half_line_similarity_half_file_jaccard():
    assert proxy_quality(REF, REF) == 1.0
    assert proxy_quality(diff("other.py", ["a"], ["b"]), REF) == 0.0
    # same file, one of two changed lines in common: ratio 2*1/4
    assert proxy_quality(diff("m.py", ["x = 1"], ["x = 3"]), REF) == pytest.approx(0.5 * 0.5 + 0.5)
    # an extra file halves the Jaccard; the lines match 2 of 4
    both = REF + diff("n.py", ["a"], ["b"])
    assert proxy_quality(both, REF) == pytest.approx(0.5 * (2 * 2 / 6) + 0.5 * 0.5)


def tiers_of(values):
    """Item i of `values` (lower is better) in tiers; equal values tie."""
    return tuple(tuple(str(i) for i, v in enumerate(values) if v == k) for k in sorted(set(values)))


def test_tau_b_with_ties_matches_scipy():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(2, 7)
        a, b = [rng.randint(0, 3) for _ in range(n)], [rng.randint(0, 3) for _ in range(n)]
        expected = kendalltau(a, b).statistic
        ours = kendall_tau(tiers_of(a), tiers_of(b))
        if ours is None:
            assert expected != expected  # scipy says nan where tau-b is undefined
        else:
            assert ours == pytest.approx(expected)


def test_top1_share_counts_a_tied_best_tier_as_a_pick_among_it():
    assert top1_share(reference=[["a"], ["b", "c"]], predicted=[["a", "b", "c"]]) == pytest.approx(1 / 3)
    assert top1_share(reference=[["a"], ["b"]], predicted=[["a"], ["b"]]) == 1.0


def test_only_groups_with_two_passing_patches_and_two_proxy_values_are_used():
    good, worse = REF, diff("m.py", ["x = 1"], ["x = 3"])
    groups = [group("used", good, worse), group("one passing", good), group("equal proxies", good, good)]
    evaluation = evaluate(groups, {})
    assert evaluation.used == ("used",)
    assert evaluation.groups_with_reference == 3
    assert all(r.groups == 1 for r in evaluation.results)


def test_baselines_rank_short_and_few_file_patches_first():
    short, long_ = REF, diff("m.py", ["x = 1"], ["x = 2", "y = 3", "z = 4"])
    wide = REF + diff("n.py", ["a"], ["b"])
    g = group("g", long_, short, wide)
    assert shortest_first(g.view)[0] == ("t2",)
    results = {r.name: r for r in evaluate([g], {}).results}
    assert results["fewest files first"].tau.value > 0
    assert results["shortest patch first"].top1.value == 1.0


def test_random_is_the_mean_of_100_seeds_and_the_same_every_run():
    g = group("g", REF, diff("m.py", ["x = 1"], ["x = 3"]), diff("n.py", ["a"], ["b"]))
    first, again = (evaluate([g], {}).results[-1] for _ in range(2))
    assert first.name == RANDOM and first == again
    orders = {random_order(g.view, seed) for seed in range(100)}
    assert len(orders) == 6  # every permutation of three shows up among 100 seeds
    assert abs(first.tau.value) < 0.3


def test_the_table_names_the_proxy_and_every_ranking():
    g = group("g", REF, diff("m.py", ["x = 1"], ["x = 3"]))
    table = format_table(evaluate([g], {"mine": shortest_first}))
    assert table.startswith(PROXY_LABEL)
    for name in ("mine", "shortest patch first", "fewest files first", RANDOM):
        assert name in table
