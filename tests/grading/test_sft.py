"""The pure parts of the grader SFT export: answers the grader accepts, text in its alphabet,
the split by task, swapped rankings and near duplicates."""

import doctest
import json
import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import grading.sft
from grading.actions import submission_schema
from grading.agreement import kendall_tau, positions
from grading.backends import Backend, Reply
from grading.graders.agentic import AgenticGrader, schema_errors
from grading.rankings import FLAGS, InvalidRanking
from grading.sft import (
    MISSING_RATIONALE,
    RATIONALE_CHARS,
    TRAIN,
    VALIDATION,
    NearDuplicates,
    answer,
    grader_text,
    patch_fingerprint,
    same_ranking,
    split_of,
    swapped,
    workspace_for,
)
from tests.grading.agentic_fixtures import make_group, patch

GROUP = make_group("g7", passed=(True, True, False, True, True))
SCHEMA = submission_schema(workspace_for(GROUP, 0), RATIONALE_CHARS)
RATIONALE = re.compile(SCHEMA["properties"]["rationales"]["properties"]["A"]["pattern"])
TIERS = [["t4"], ["t1", "t5"], ["t2"]]
RATIONALES = {"t1": "fine", "t2": "prints debug output at pkg/mod.py:1", "t4": "smallest fix", "t5": "ok"}


def test_doctests_run():
    assert doctest.testmod(grading.sft).failed == 0


class Scripted(Backend):
    """A model that answers every conversation with one fixed reply, and keeps what it was sent."""

    model_id = "scripted"

    def __init__(self, reply: str):
        self.reply, self.conversations = reply, []

    def generate(self, conversations, schemas, sampling):
        self.conversations += [list(c) for c in conversations]
        return [Reply(self.reply, prompt_tokens=10, completion_tokens=10)] * len(conversations)


@pytest.mark.parametrize("seed", [0, 5])
def test_an_example_is_the_graders_first_turn_and_an_answer_it_accepts(seed):
    workspace = workspace_for(GROUP, seed)
    prompt = workspace.initial_messages()
    reply = answer(workspace, TIERS, RATIONALES, {"t2": ["debug_leftovers"]})
    model = Scripted(reply["content"])
    grade = AgenticGrader(model, seed=seed).rank(GROUP)
    assert model.conversations == [prompt]
    assert same_ranking(grade.tiers, TIERS)
    assert dict(grade.flags) == {"t2": ("debug_leftovers",)} and dict(grade.rationales) == RATIONALES
    assert reply["role"] == "assistant"


def test_an_answer_lists_labels_in_the_order_its_schema_fixes():
    workspace = workspace_for(GROUP, 3)
    action = json.loads(answer(workspace, TIERS, RATIONALES, {})["content"])
    order = list(workspace.labels)
    assert list(action) == ["tool", "ranking", "rationales", "flags"]
    assert all(tier == sorted(tier, key=order.index) for tier in action["ranking"])
    assert list(action["rationales"]) == list(action["flags"]) == list(workspace.passing_labels)
    assert schema_errors(action, submission_schema(workspace, RATIONALE_CHARS)) == []


def test_an_answer_without_every_rationale_is_refused():
    workspace = workspace_for(GROUP, 0)
    with pytest.raises(InvalidRanking, match=MISSING_RATIONALE):
        answer(workspace, TIERS, {**RATIONALES, "t5": "  \n"}, {})
    with pytest.raises(InvalidRanking, match=MISSING_RATIONALE):
        answer(workspace, TIERS, {**RATIONALES, "t5": "日本語"}, {})  # nothing left in the alphabet


def test_an_answer_with_more_flags_than_the_schema_allows_is_refused():
    with pytest.raises(InvalidRanking, match="not an answer the grader may give"):
        answer(workspace_for(GROUP, 0), TIERS, RATIONALES, {"t1": list(FLAGS[:4])})


def test_hostile_rationales_become_text_the_grader_may_write():
    hostile = {tid: '<b>"quoted"</b> C:\\path\n\tnext — “curly” ' + "x" * 600 for tid in RATIONALES}
    action = json.loads(answer(workspace_for(GROUP, 0), TIERS, hostile, {})["content"])
    assert all(RATIONALE.fullmatch(text) for text in action["rationales"].values())
    assert action["rationales"]["A"].startswith("<b>'quoted'</b> C:/path next - 'curly' x")


@given(st.text())
def test_grader_text_always_fits_the_answer_schema_or_is_empty(text):
    cleaned = grader_text(text)
    assert cleaned == "" or RATIONALE.fullmatch(cleaned)
    assert grader_text(cleaned) == cleaned


def test_plain_text_within_the_limit_is_kept_as_it_is():
    text = "A is smaller; B edits tests/test_x.py:12 and leaves print() at B#4."
    assert grader_text(text) == text


def test_the_split_is_by_task_deterministic_and_follows_the_seed():
    tasks = [f"task-{i}" for i in range(2000)]
    first = [split_of(t, seed=1, validation_share=0.2) for t in tasks]
    assert first == [split_of(t, seed=1, validation_share=0.2) for t in tasks]
    assert 0.17 < first.count(VALIDATION) / len(tasks) < 0.23
    other = [split_of(t, seed=2, validation_share=0.2) for t in tasks]
    assert other != first and set(first) == {TRAIN, VALIDATION}


def test_a_larger_share_only_moves_tasks_into_validation():
    tasks = [f"t{i}" for i in range(500)]
    small = {t for t in tasks if split_of(t, seed=0, validation_share=0.1) == VALIDATION}
    large = {t for t in tasks if split_of(t, seed=0, validation_share=0.3) == VALIDATION}
    assert small < large


def test_a_swap_reverses_one_strictly_ordered_pair_and_nothing_else():
    rng = random.Random(0)
    for _ in range(200):
        ids = [f"t{i}" for i in range(rng.randint(2, 7))]
        rng.shuffle(ids)
        cuts = sorted(rng.sample(range(1, len(ids)), rng.randint(1, len(ids) - 1)))
        tiers = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)], strict=True)]
        worse = swapped(tiers)
        before, after = positions(tiers), positions(worse)
        moved = {t for t in ids if before[t] != after[t]}
        best, worst = tiers[0][0], tiers[-1][-1]
        assert moved == {best, worst} and after[best] > after[worst]
        assert not same_ranking(tiers, worse) and kendall_tau(tiers, worse) < 1
    assert swapped([["a", "b"]]) is None


def test_same_ranking_ignores_order_inside_a_tier():
    assert same_ranking([["a", "b"], ["c"]], [["b", "a"], ["c"]])
    assert not same_ranking([["a", "b"], ["c"]], [["a"], ["b"], ["c"]])


def test_a_patch_fingerprint_ignores_offsets_context_and_spacing_but_not_the_change():
    base = patch("pkg/mod.py", "return x", "return x + 1", line=3)
    moved = patch("pkg/mod.py", "return x", "return  x +  1", line=40).replace("@@", "@@ ctx", 1)
    with_index = base.replace("--- a/", "index 1234..5678 100644\n--- a/", 1)
    assert patch_fingerprint(base) == patch_fingerprint(moved) == patch_fingerprint(with_index)
    assert patch_fingerprint(base) != patch_fingerprint(patch("pkg/mod.py", "return x", "return x + 2"))
    assert patch_fingerprint(base) != patch_fingerprint(patch("pkg/other.py", "return x", "return x + 1"))


def test_near_duplicates_need_the_same_task_and_similar_patches():
    keep = NearDuplicates(threshold=1.0)
    assert keep.twin("g1", "task", frozenset({"a", "b"})) is None
    assert keep.twin("g2", "task", frozenset({"b", "a"})) == "g1"
    assert keep.twin("g3", "other", frozenset({"a", "b"})) is None
    assert keep.twin("g4", "task", frozenset({"a", "b", "c"})) is None
    looser = NearDuplicates(threshold=0.6)
    assert looser.twin("g1", "task", frozenset({"a", "b"})) is None
    assert looser.twin("g2", "task", frozenset({"a", "b", "c"})) == "g1"  # 2/3 alike
    assert looser.twin("g3", "task", frozenset({"c", "d"})) is None
