"""The heuristic grader on large groups: consensus and tie reasons linear in the group's size,
with the same results as their pairwise definitions (kept here as plain loops) and as
`equivalence_classes` parsing every patch again."""

import random
from collections.abc import Mapping, Sequence

import pytest

from grading import patch_features
from grading.cases import GroupCase, TrajectoryCase
from grading.diffs import equivalence_classes
from grading.graders import heuristic
from grading.graders.heuristic import HeuristicGrader
from grading.patch_features import Features
from grading.penalties import TIE_TOLERANCE, assess, first_few

LINES = ["    return x + 1", "    return x+1", "    x = x.strip()", "    y = parse(x)", "    return y",
         "    print(x)", "    # return x", "    if x == '2023-01-01' and y == '42':", "    return None", "    pass"]


def reference_consensus(features: Mapping[str, Features], keys: Mapping[str, object]) -> None:
    """The definition, pairwise: per fix, the mean over the other distinct changes that add code
    of the share of its added lines the other does not add."""
    distinct = {}
    for tid, key in keys.items():
        if features[tid].added_lines:
            distinct.setdefault(key, features[tid].added_lines)
    for tid, f in features.items():
        others = [lines for key, lines in distinct.items() if key != keys[tid]]
        f.other_changes = len(others)
        if others and f.added_lines:
            f.unshared_added = sum(len(f.added_lines - lines) for lines in others) / (
                len(others) * len(f.added_lines))


def reference_tie_reasons(tier: Sequence[str], same_change: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each tid's reason from the whole lists of the others and of the same change."""
    out = {}
    for tid in tier:
        others = [other for other in tier if other != tid]
        same = [other for other in others if other in same_change.get(tid, ())]
        if len(same) == len(others):
            out[tid] = f"tied with {first_few(others)}: the same change"
        elif same:
            out[tid] = (f"tied with {first_few(others)}: the same change as {first_few(same)}, "
                        f"penalties within {TIE_TOLERANCE} of the rest")
        else:
            out[tid] = f"tied with {first_few(others)}: penalties within {TIE_TOLERANCE}, equal evidence"
    return out


def random_patch(rng: random.Random) -> str:
    """A fix of one or two files from a small vocabulary, so that changes repeat, overlap,
    differ only in whitespace, only delete, or do not parse."""
    kind = rng.random()
    if kind < 0.05:
        return "not a patch"
    if kind < 0.1:
        return ""
    out = []
    for path in rng.sample(["pkg/a.py", "pkg/b.py", "tests/test_a.py", "debug.log"], rng.randint(1, 2)):
        added = [] if rng.random() < 0.1 else rng.sample(LINES, rng.randint(1, 4))
        if rng.random() < 0.2:
            added = [line.replace(" ", "  ", 1) for line in added]
        removed = rng.sample(["    return x", "    x = 1"], rng.randint(0, 2))
        if not added and not removed:
            removed = ["    return x"]
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
                   f"@@ -10,{len(removed) + 1} +10,{len(added) + 1} @@ def f(x):\n def g():\n"
                   + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added))
    return "".join(out)


def random_group(rng: random.Random) -> GroupCase:
    pool = [random_patch(rng) for _ in range(rng.randint(1, 6))]  # few patches: repeats and ties
    trajectories = tuple(
        TrajectoryCase(f"t{i:02d}", rng.random() < 0.8, 1.0, rng.choice(pool),
                       metrics={"num_turns": rng.choice([5, 10, 20, None]), "output_tokens": rng.choice([100, 900])})
        for i in range(rng.randint(1, 40)))
    return GroupCase(group_id="g", statement="Fix the date '2023-01-01' for id '42'.", trajectories=trajectories)


@pytest.mark.parametrize("seed", range(300))
def test_grades_are_those_of_the_pairwise_definitions(seed, monkeypatch):
    group = random_group(random.Random(seed))
    grader = HeuristicGrader()
    grade, steps = grader.rank(group), grader.explain(group)
    with monkeypatch.context() as patched:
        patched.setattr(patch_features, "_consensus", reference_consensus)
        patched.setattr(heuristic, "_tie_reasons", reference_tie_reasons)
        patched.setattr(heuristic, "_same_changes", lambda group, keys: equivalence_classes(
            {t.trajectory_id: t.patch for t in group.passing}))
        reference, reference_steps = grader.rank(group), grader.explain(group)
    assert (grade.tiers, grade.rationales, grade.flags, grade.scores, grade.confidence) == (
        reference.tiers, reference.rationales, reference.flags, reference.scores, reference.confidence)
    assert steps == reference_steps


def test_the_random_groups_exercise_consensus_ties_and_shared_changes():
    """The comparison above means something: its groups have consensus terms, tiers of
    several trajectories, tiers of one change and ties of different changes."""
    seen = set()
    for seed in range(300):
        grade = HeuristicGrader().rank(random_group(random.Random(seed)))
        text = " ".join(grade.rationales.values())
        seen |= {name for name, mark in (("consensus", "other distinct passing fix"), ("same", "the same change"),
                                         ("mixed", "the same change as"), ("equal", "equal evidence"),
                                         ("unnamed", "more")) if mark in text}
    assert seen == {"consensus", "same", "mixed", "equal", "unnamed"}


def big_group(n: int) -> GroupCase:
    """`n` passing trajectories: a few changes each made many times, and many made once."""
    trajectories = []
    for i in range(n):
        added = ([f"    total_{i % 7} = normalise(x)"] if i % 3
                 else [f"    total = normalise(x, {i})", "    return total"])
        patch = ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
                 f"@@ -10,2 +10,{len(added) + 1} @@ def f(x):\n def g():\n-    return x\n"
                 + "".join(f"+{line}\n" for line in added))
        trajectories.append(TrajectoryCase(f"r{i:05d}", True, 1.0, patch))
    return GroupCase(group_id="big", statement="", trajectories=tuple(trajectories))


def test_consensus_looks_at_each_added_line_a_bounded_number_of_times(monkeypatch):
    """Linear, not pairwise: over 3,000 fixes (2,000 distinct changes) the lines looked up stay
    within a few per added line; pairwise they would be millions of set differences."""
    group = big_group(3000)
    looked_up = 0
    counter = patch_features.Counter

    class CountingCounter(counter):
        def __getitem__(self, line):
            nonlocal looked_up
            looked_up += 1
            return super().__getitem__(line)

    monkeypatch.setattr(patch_features, "Counter", CountingCounter)
    features = assess(group).features
    added = sum(len(f.added_lines) for f in features.values())
    assert looked_up == added
    assert max(f.other_changes for f in features.values()) >= 1000


def test_tie_reasons_of_a_large_tier_name_a_few_and_count_the_rest():
    tier = tuple(f"r{i:05d}" for i in range(5000))
    same_change = {tid: tier[:4000] for tid in tier[:4000]}
    reasons = heuristic._tie_reasons(tier, same_change)
    assert reasons["r00000"] == (f"tied with r00001, r00002, r00003, +4996 more: the same change as "
                                 f"r00001, r00002, r00003, +3996 more, penalties within {TIE_TOLERANCE} of the rest")
    assert reasons["r04999"] == (f"tied with r00000, r00001, r00002, +4996 more: penalties within {TIE_TOLERANCE}, "
                                 "equal evidence")
    small = tier[:40]
    assert heuristic._tie_reasons(small, same_change) == reference_tie_reasons(small, same_change)
