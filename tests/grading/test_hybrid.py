"""The hybrid grader: the heuristic's ranking as a prior the LLM overturns only with a reason.

`Scripted` is our own stand-in for the LLM (a Backend whose replies the test writes); the
tiny random-weight model runs the same grader through a profile at the end.
"""

import random
from itertools import combinations

import pytest

from grading.backends import Backend, Reply
from grading.cases import Grade, GraderError
from grading.graders.agentic import Budget, run_seed
from grading.graders.heuristic import HeuristicGrader, confidence
from grading.graders.hybrid import (
    FALLBACK,
    PRIOR_RULES,
    HybridGrader,
    gives_reason,
    kept_share,
    overturned,
    reconcile,
)
from grading.penalties import assess
from grading.profiles import build_grader, load_profiles
from grading.workspace import Workspace, render_submission
from tests.grading import agentic_fixtures as fx
from tests.grading.agentic_fixtures import make_group
from tests.grading.test_workspace import hunk

tiny_model, tiny_backend = fx.tiny_model, fx.tiny_backend

LEAN = hunk("pkg/mod.py", ["return x"], ["return x.strip(',')"])
# The heuristic's prior: t1 (lean) > t2 (debug output) > t3 (edits tests, leaves a stray file).
GROUP = make_group(passed=(True, True, True, False), patches=[
    LEAN,
    hunk("pkg/mod.py", ["return x"], ["print(x)", "return x.strip(',')"]),
    LEAN + hunk("tests/test_mod.py", ["assert f('a,') == 'a'"], ["assert f('a,')"])
    + hunk("repro.py", [], ["print(1)"], added_file=True),
    hunk("pkg/mod.py", ["return x"], ["return None"]),
])
PRIOR = (("t1",), ("t2",), ("t3",))


class Scripted(Backend):
    """The LLM's stand-in: every conversation is answered by `reply(conversation)`, a reply's
    text or a GraderError; what it was shown is kept in `seen`."""

    model_id = "scripted"

    def __init__(self, reply):
        self.reply, self.seen = reply, []

    def generate(self, conversations, schemas, sampling):
        self.seen += [list(c) for c in conversations]
        answers = [self.reply(c) for c in conversations]
        return [a if isinstance(a, GraderError) else Reply(a, prompt_tokens=50, completion_tokens=20)
                for a in answers]


def workspace(group=GROUP) -> Workspace:
    """The labelling the grader's first run uses (seed 0)."""
    return Workspace(group, run_seed(0, group.group_id, 0))


def submitting(tiers, rationales):
    """A backend that submits `tiers` (ids) with `rationales` (ids; `{X}` -> the label of X)."""
    ws = workspace()
    text = {tid: r.format(**{t: ws.label_of(t) for t in ws.mapping.values()}) for tid, r in rationales.items()}
    return Scripted(lambda conversation: render_submission(ws, tiers, text))


def hybrid(backend, **options) -> HybridGrader:
    return HybridGrader(backend, budget=Budget(max_turns=2), **options)


def test_the_prior_is_kept_when_the_llm_agrees():
    backend = submitting(PRIOR, {"t1": "leanest", "t2": "debug print", "t3": "edits tests"})
    grade = hybrid(backend).rank(GROUP)
    assert grade.tiers == PRIOR
    penalties = assess(GROUP).penalties
    assert grade.confidence == pytest.approx((1 + confidence(PRIOR, penalties)) / 2)
    assert grade.rationales["t2"] == "debug print"
    assert grade.version.startswith("hybrid-") and HeuristicGrader.version in grade.version
    prior = next(e for e in grade.transcript if e.get("event") == "prior")
    assert prior["prior"] == [list(t) for t in PRIOR] and prior["reverted"] == []


def test_the_first_turn_shows_the_prior_by_labels_never_ids():
    backend = submitting(PRIOR, {"t1": "a", "t2": "b", "t3": "c"})
    hybrid(backend).rank(GROUP)
    first = backend.seen[0][1]["content"]
    ws = workspace()
    assert PRIOR_RULES in first
    assert f"\n1. {ws.label_of('t1')} (penalty 0.00): no penalty" in first
    assert (f"\n2. {ws.label_of('t2')} (penalty 3.10): 1 line(s) of debug output (pkg/mod.py) [3.00]; "
            "200 output tokens vs 100 [0.10]") in first
    assert f"\n3. {ws.label_of('t3')} (penalty " in first and "edits tests (tests/test_mod.py)" in first
    assert first.index("PASS") < first.index(PRIOR_RULES) < first.index("You have 2 turns")
    assert not any(f"t{i}" in first for i in range(1, 5))


def test_a_flip_with_a_stated_reason_is_kept():
    backend = submitting((("t2",), ("t1",), ("t3",)),
                         {"t1": "lean", "t2": "over {t1}: the task asks to print x", "t3": "edits tests"})
    grade = hybrid(backend).rank(GROUP)
    assert grade.tiers == (("t2",), ("t1",), ("t3",))
    penalties = assess(GROUP).penalties
    assert grade.confidence == pytest.approx(2 / 3 * (1 + confidence(PRIOR, penalties)) / 2)
    assert next(e for e in grade.transcript if e.get("event") == "prior")["reverted"] == []


def test_a_flip_without_a_reason_is_reverted_and_says_so():
    backend = submitting((("t2",), ("t1",), ("t3",)),
                         {"t1": "lean", "t2": "the task asks to print x", "t3": "edits tests"})
    grade = hybrid(backend).rank(GROUP)
    assert grade.tiers == PRIOR
    below = workspace().label_of("t1")
    assert grade.rationales["t2"] == (f"the task asks to print x [the prior's order kept: below {below}, "
                                      f"as no reason was given over {below}]")
    assert next(e for e in grade.transcript if e.get("event") == "prior")["reverted"] == [["t1", "t2"]]


def test_a_tie_is_an_overturn_too():
    backend = submitting((("t1", "t3"), ("t2",)), {"t1": "lean", "t2": "debug", "t3": "as lean"})
    assert hybrid(backend).rank(GROUP).tiers == PRIOR


@pytest.mark.parametrize(("reply", "why"), [
    (lambda c: GraderError("server down", permanent=False), "server down"),
    (lambda c: "not json", "invalid ranking after the repair turn: not JSON"),
])
def test_when_the_llm_fails_the_grade_is_the_heuristics_and_names_the_fallback(reply, why):
    grade = HybridGrader(Scripted(reply), budget=Budget(max_turns=1)).rank(GROUP)
    heuristic = HeuristicGrader().rank(GROUP)
    assert isinstance(grade, Grade) and grade.tiers == heuristic.tiers == PRIOR
    for tid, text in grade.rationales.items():
        assert text.startswith(f"{FALLBACK}: group g1: ") and why in text
        assert text.endswith(heuristic.rationales[tid])
    assert grade.usage["fallback"] == 1 and grade.confidence == heuristic.confidence
    assert grade.transcript[-1]["event"] == "fallback" and why in grade.transcript[-1]["reason"]
    assert grade.version.startswith("hybrid-") and grade.scores is None


def test_a_failing_group_falls_back_alone():
    other = make_group("g2", passed=(True, True), patches=[LEAN, LEAN], statement="Fix g2.")
    good = render_submission(workspace(other), [["t1", "t2"]], {"t1": "same", "t2": "same"})
    backend = Scripted(lambda c: good if "Fix g2." in c[1]["content"] else "{}")
    grades = hybrid(backend).rank_many([GROUP, other])
    assert grades[0].usage["fallback"] == 1 and "fallback" not in grades[1].usage
    assert grades[1].tiers == (("t1", "t2"),)


def test_gives_reason_needs_over_the_label_and_something_more():
    assert gives_reason("Over B: no debug print", "B")
    assert gives_reason("smaller, over  AB and over B too", "B")
    assert not gives_reason("over B", "B")
    assert not gives_reason("over BA: smaller", "B")
    assert not gives_reason("B prints; this does not", "B")


def test_reconcile_keeps_the_prior_order_where_a_reverted_pair_forces_it():
    prior = (("w",), ("x",), ("y",))
    # y over w is justified, x over w is not: x drops below w, and y, below x in both
    # rankings, goes with it.
    tiers, reverted = reconcile(prior, (("x",), ("y",), ("w",)), {"x": "lean", "y": "over W: lean"}, str.upper)
    assert reverted == [("w", "x")]
    assert tiers == prior


def test_reconcile_moves_only_what_it_must_and_keeps_the_llms_order_among_the_moved():
    prior = (("a",), ("b", "c"), ("d",))
    submitted = (("c",), ("b",), ("d",), ("a",))
    rationales = {"c": "clean", "b": "ok", "d": "over A: the only complete fix"}
    tiers, reverted = reconcile(prior, submitted, rationales, str.upper)
    assert reverted == [("a", "b"), ("a", "c")]
    assert tiers == (("a",), ("c",), ("b",), ("d",))


def test_reconcile_invariants_over_random_rankings():
    rng = random.Random(17)
    for _ in range(400):
        ids = [f"t{i}" for i in range(rng.randint(2, 6))]
        prior, submitted = random_tiers(rng, ids), random_tiers(rng, ids)
        rationales = {t: "fine " + " ".join(f"over {o.upper()}" for o in ids if rng.random() < 0.4)
                      for t in ids}
        tiers, reverted = reconcile(prior, submitted, rationales, str.upper)
        assert sorted(t for tier in tiers for t in tier) == sorted(ids)
        pairs = overturned(prior, submitted)
        justified = set(pairs) - set(reverted)
        assert set(reverted) <= set(pairs)
        assert all(gives_reason(rationales[y], x.upper()) for x, y in justified)
        position = {t: i for i, tier in enumerate(tiers) for t in tier}
        was = {t: i for i, tier in enumerate(prior) for t in tier}
        for x, y in combinations(ids, 2):
            for hi, lo in ((x, y), (y, x)):
                if was[hi] < was[lo] and (hi, lo) not in justified:
                    assert position[hi] < position[lo]
        if not reverted:
            assert tiers == submitted
        assert kept_share(prior, tiers) >= kept_share(prior, submitted)


def random_tiers(rng, ids):
    order = rng.sample(ids, len(ids))
    tiers, tier = [], [order[0]]
    for tid in order[1:]:
        if rng.random() < 0.3:
            tier.append(tid)
        else:
            tiers.append(tuple(tier))
            tier = [tid]
    return tuple(tiers) + (tuple(tier),)


def test_a_hybrid_profile_builds_and_grades_with_the_tiny_model(tiny_model, tmp_path):
    path = tmp_path / "graders.toml"
    path.write_text(f"[graders.tiny-hybrid]\ngrader = 'hybrid'\nbackend = 'transformers'\n"
                    f"model = '{tiny_model}'\n[graders.tiny-hybrid.budget]\nmax_turns = 2\n"
                    "rationale_chars = 16\n[graders.tiny-hybrid.options]\nthreads = 1\n")
    built = build_grader(load_profiles(path)["tiny-hybrid"])
    assert isinstance(built, HybridGrader) and built.name == "tiny-hybrid"
    grade = built.rank(GROUP)
    assert grade.grader == "tiny-hybrid" and grade.version.startswith("hybrid-")
    assert sorted(t for tier in grade.tiers for t in tier) == ["t1", "t2", "t3"]
    assert 0 <= grade.confidence <= 1
