"""The agentic grader's loop on a real (tiny, random-weight) model: nonsense output, real code paths.

Every reply comes from constrained decoding on the transformers backend; nothing is canned.
Assertions hold for whatever the random model writes, and the batches are large enough that
each path (tool calls, forced submission, repair, failure) is taken.
"""

import json
import re
from itertools import combinations
from pathlib import Path

import pytest

from grading.actions import action_schema, submission_schema
from grading.backends import Backend, Reply, Sampling, load_backend
from grading.cases import Grade, GraderError
from grading.graders.agentic import (
    AgenticGrader,
    Budget,
    GradingFailed,
    borda,
    decode_action,
    run_agreement,
    schema_errors,
)
from grading.graders.base import load_grader
from grading.graders.heuristic import HeuristicGrader
from grading.profiles import ProfileError, build_grader, load_profiles
from grading.tiny_model import build_tiny_model
from grading.tool_limits import Caps
from grading.workspace import Workspace
from tests.grading import agentic_fixtures as fx
from tests.grading.agentic_fixtures import make_group

tiny_model, tiny_backend, sample_groups = fx.tiny_model, fx.tiny_backend, fx.sample_groups

CAPS = Caps(output_chars=600, statement_chars=300, turn_chars=200)
SAMPLED = Sampling(temperature=1.0, seed=7)
FORCED_NOTE = "[Budget spent: your next reply must be submit_ranking.]"


def grader(backend, *, max_turns=3, max_tokens=6000, k=1, **options):
    return AgenticGrader(backend, sampling=options.pop("sampling", SAMPLED), caps=CAPS, k=k,
                         budget=Budget(max_turns=max_turns, max_tokens=max_tokens,
                                       rationale_chars=16), **options)


def runs_of(result, groups_by_id):
    """(workspace, entries) per run, the workspace rebuilt from the recorded seed."""
    runs = {}
    for entry in result.transcript:
        if entry.get("event") == "start":
            group = groups_by_id[entry["group"]]
            workspace = Workspace(group, entry["seed"], CAPS)
            assert workspace.mapping == entry["labels"]
            runs[entry["run"]] = (workspace, [])
        elif "run" in entry:
            runs[entry["run"]][1].append(entry)
    return list(runs.values())


def schema_of(entry, workspace):
    """The schema an assistant turn was decoded under, from what the transcript recorded."""
    if entry["schema"] in ("any", "tools"):
        return action_schema(workspace, 16, submit=entry["schema"] == "any")
    return submission_schema(workspace, 16)


def assistant_turns(entries):
    return [e for e in entries if e.get("role") == "assistant"]


def test_every_reply_is_a_schema_valid_action_and_tools_run(tiny_backend, sample_groups):
    results = grader(tiny_backend, max_turns=3).rank_many(sample_groups)
    by_id = {g.group_id: g for g in sample_groups}
    tool_outputs = []
    for result in results:
        assert isinstance(result, Grade | GradingFailed)
        for workspace, entries in runs_of(result, by_id):
            for entry in assistant_turns(entries):
                schema = schema_of(entry, workspace)
                assert schema_errors(json.loads(entry["content"]), schema) == []
                assert entry["action"] == json.loads(entry["content"])
            tool_outputs += [e for e in entries if e.get("role") == "tool"]
            first_user = next(e for e in entries if e.get("role") == "user")
            if len(workspace.labels) == 8:
                assert "[truncated: showed " in first_user["content"]
    assert tool_outputs, "the random model called no tool in any run"
    assert all(e["content"] and e["tool"] for e in tool_outputs)


def test_a_spent_turn_budget_switches_to_the_submission_schema(tiny_backend):
    groups = [make_group(f"g{i}", passed=(True, True, True, False)) for i in range(6)]
    results = grader(tiny_backend, max_turns=2).rank_many(groups)
    by_id = {g.group_id: g for g in groups}
    forced = 0
    for result in results:
        for _, entries in runs_of(result, by_id):
            turns = assistant_turns(entries)
            assert len(turns) <= 3  # two turns and at most one repair
            if turns[0]["action"]["tool"] != "submit_ranking":
                forced += 1
                output = next(e for e in entries if e.get("role") == "tool")
                assert output["content"].endswith(FORCED_NOTE)
                assert turns[1]["schema"] == "forced"
                assert turns[1]["action"]["tool"] == "submit_ranking"
    assert forced, "no run called a tool first, so none was forced"


def test_one_turn_budget_forces_the_first_reply(tiny_backend):
    result = grader(tiny_backend, max_turns=1).rank(make_group(passed=(True, True)))
    user = [e for e in result.transcript if e.get("role") == "user"][0]
    assert user["content"].endswith(FORCED_NOTE)
    first = [e for e in result.transcript if e.get("role") == "assistant"][0]
    assert first["schema"] == "forced" and first["action"]["tool"] == "submit_ranking"


def test_min_turns_hold_the_submission_back_and_fix_the_turn_count(tiny_backend):
    groups = [make_group(f"g{i}", passed=(True, True, True)) for i in range(4)]
    budget = Budget(max_turns=3, min_turns=2, rationale_chars=16)
    results = AgenticGrader(tiny_backend, sampling=SAMPLED, caps=CAPS,
                            budget=budget).rank_many(groups)
    by_id = {g.group_id: g for g in groups}
    for result in results:
        assert isinstance(result, Grade) and result.version.endswith("r16m2:k1")
        (workspace, entries), = runs_of(result, by_id)
        turns = assistant_turns(entries)
        assert [t["schema"] for t in turns] == ["tools", "tools", "forced"]
        for turn in turns:
            assert schema_errors(turn["action"], schema_of(turn, workspace)) == []


def test_a_spent_token_budget_forces_a_submission(tiny_backend):
    result = grader(tiny_backend, max_turns=9, max_tokens=500).rank(make_group())
    first = [e for e in result.transcript if e.get("role") == "assistant"][0]
    assert first["schema"] == "forced"


def test_an_invalid_ranking_gets_one_repair_turn_then_fails_visibly(tiny_backend):
    groups = [make_group(f"big{i}", passed=(True,) * 6) for i in range(8)]
    results = grader(tiny_backend, max_turns=1).rank_many(groups)
    by_id = {g.group_id: g for g in groups}
    repairs = failures = 0
    for result in results:
        (workspace, entries), = runs_of(result, by_id)
        turns = assistant_turns(entries)
        try:
            workspace.submission(turns[0]["action"])
            assert len(turns) == 1 and isinstance(result, Grade)
            continue
        except ValueError as error:
            problem = str(error)
        repairs += 1
        repair = next(e for e in entries if e.get("kind") == "repair")
        assert repair["content"].startswith(f"Your submission was rejected: {problem}.")
        assert [t["schema"] for t in turns] == ["forced", "repair"]
        if isinstance(result, GraderError):
            failures += 1
            assert result.permanent
            assert str(result).startswith(f"group {workspace.group.group_id}: invalid ranking "
                                          "after the repair turn: ")
            assert result.transcript and result.usage["turns"] == 2
    assert repairs and failures


def test_k_runs_merge_by_borda_and_agreement_is_the_confidence(tiny_backend):
    groups = [make_group(f"g{i}", passed=(True, True, True)) for i in range(3)]
    results = grader(tiny_backend, max_turns=2, k=3).rank_many(groups)
    for group, grade in zip(groups, results, strict=True):
        assert isinstance(grade, Grade)  # small groups: every valid ranking is enumerated
        starts = [e for e in grade.transcript if e.get("event") == "start"]
        assert len({e["seed"] for e in starts}) == 3
        aggregate = grade.transcript[-1]
        assert aggregate["event"] == "aggregate" and aggregate["failed_runs"] == 0
        assert grade.tiers == borda(aggregate["runs"])[0]
        taus = [run_agreement(a, b) for a, b in combinations(aggregate["runs"], 2)]
        assert grade.confidence == pytest.approx(sum(taus) / 3)
        assert sorted(grade.scores) == sorted(t.trajectory_id for t in group.passing)
        assert all(0 <= s <= 1 for s in grade.scores.values())
        assert grade.usage["runs"] == 3 and grade.usage["completion_tokens"] > 0
        assert set(grade.rationales) == set(grade.scores)


class Recording(Backend):
    """The real backend, with each call's batch size written down."""

    def __init__(self, inner):
        self.inner, self.model_id, self.batches = inner, inner.model_id, []

    def generate(self, conversations, schemas, sampling):
        self.batches.append(len(conversations))
        return self.inner.generate(conversations, schemas, sampling)


def test_groups_advance_in_lockstep_one_batched_call_per_turn(tiny_backend):
    backend = Recording(tiny_backend)
    groups = [make_group(f"g{i}") for i in range(5)]
    results = grader(backend, max_turns=3, k=2).rank_many(groups)
    turns = [sum(1 for e in r.transcript if e.get("role") == "assistant" and e["run"] == run)
             for r in results for run in (0, 1)]
    assert backend.batches[0] == 10
    assert len(backend.batches) == max(turns)
    assert backend.batches == sorted(backend.batches, reverse=True)
    assert sum(backend.batches) == sum(turns)


def test_a_failing_group_leaves_the_others_graded(tiny_backend, tmp_path):
    model = build_tiny_model(tmp_path / "short", max_positions=3072)
    short = load_backend("transformers", model=str(model), threads=1)
    huge = make_group("huge", statement="The bug. " * 2000)
    groups = [make_group("a"), huge, make_group("b")]
    caps = Caps(statement_chars=30000)
    results = AgenticGrader(short, caps=caps, budget=Budget(max_turns=1)).rank_many(groups)
    assert isinstance(results[0], Grade) and isinstance(results[2], Grade)
    assert isinstance(results[1], GradingFailed) and results[1].permanent
    assert "exceeds the model's 3072" in str(results[1])
    with pytest.raises(GradingFailed):
        AgenticGrader(short, caps=caps, budget=Budget(max_turns=1)).rank(huge)


def test_the_models_context_forces_the_submission_before_it_overflows(tiny_backend, tmp_path):
    """`tiny_backend` for the guard its siblings have: it needs the llm extra (make install-llm)."""
    model = build_tiny_model(tmp_path / "short", max_positions=3000)
    short = load_backend("transformers", model=str(model), threads=1)
    budget = Budget(max_turns=12, min_turns=11, rationale_chars=16)  # only tokens can force
    lines = "".join(f"+    total_{i} = compute(part_{i}, rounding)\n" for i in range(80))
    big = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -0,0 +1,80 @@\n" + lines
    turns = [[{"role": "assistant", "content": "step " * 400}] * 30] * 3
    groups = [make_group(f"g{i}", passed=(True, True, True), patches=[big] * 3, messages=turns)
              for i in range(4)]
    results = AgenticGrader(short, sampling=SAMPLED, caps=Caps(output_chars=1500),
                            budget=budget).rank_many(groups)
    for result in results:
        assert isinstance(result, Grade)
        turns = assistant_turns(result.transcript)
        assert 1 < len(turns) < 12 and turns[-1]["schema"] == "forced"
        assert result.usage["prompt_tokens"] > 0


def test_groups_with_fewer_than_two_passing_need_no_model_call(tiny_backend):
    backend = Recording(tiny_backend)
    one, none = make_group(passed=(True, False)), make_group(passed=(False, False))
    graded = grader(backend).rank_many([one, none])
    assert backend.batches == []
    assert graded[0].tiers == (("t1",),) and graded[1].tiers == ()
    assert graded[0].transcript[0]["event"] == "skipped"


def test_the_version_is_short_stable_and_tracks_what_changes_grades(tiny_backend):
    version = grader(tiny_backend).version
    assert version == grader(tiny_backend).version
    assert re.fullmatch(r"tiny-model:p[0-9a-f]{8}:t1p1s7:b3x6000r16:k1", version)
    assert grader(tiny_backend, k=3).version.endswith(":k3")
    assert grader(tiny_backend, sampling=Sampling()).version != version
    assert grader(tiny_backend, max_turns=4).version != version
    other_caps = AgenticGrader(tiny_backend, sampling=SAMPLED, caps=Caps(output_chars=700),
                               budget=Budget(max_turns=3, max_tokens=6000, rationale_chars=16))
    assert other_caps.version.split(":")[1] != version.split(":")[1]


def test_the_grader_loads_by_registered_name(tiny_model):
    loaded = load_grader("agentic", backend="transformers",
                         backend_options={"model": str(tiny_model)}, k=2)
    assert isinstance(loaded, AgenticGrader) and loaded.version.endswith(":k2")


def test_it_declares_that_it_reads_the_transcripts_and_tests_its_tools_show():
    """The worker loads only what a grader declares it reads."""
    workspace = Workspace(make_group(), seed=0)
    label = workspace.labels[0]
    assert "I will edit pkg/mod.py" in workspace.view_transcript(label)
    assert "tests/test_mod.py::test_f" in workspace.view_tests(label)
    assert AgenticGrader.uses_messages and AgenticGrader.uses_tests


def test_a_cut_or_malformed_reply_says_why():
    schema = {"type": "object", "properties": {"tool": {"const": "x"}}, "required": ["tool"]}
    assert decode_action(Reply('{"tool": "x"}', 1, 1), schema) == ({"tool": "x"}, None)
    action, problem = decode_action(Reply('{"tool": "vi', 1, 9, "length"), schema)
    assert action is None and problem.endswith("(the reply was cut at the token limit)")
    assert decode_action(Reply('{"tool": "y"}', 1, 1), schema)[1] == "$.tool: expected 'x'"
    assert decode_action(Reply("[1]", 1, 1), schema) == (None, "not a JSON object")


def test_borda_ties_equal_means_and_matches_a_loop_reference():
    runs = [[["a"], ["b", "c"]], [["b"], ["a"], ["c"]], [["c", "a", "b"]]]
    tiers, points = borda(runs)
    reference = {}
    for run in runs:
        flat = [(t, i) for i, tier in enumerate(run) for t in tier]
        for t, _ in flat:
            below = sum(1 for u, _ in flat if _rank(run, u) > _rank(run, t))
            tied = sum(1 for u, _ in flat if _rank(run, u) == _rank(run, t) and u != t)
            reference[t] = reference.get(t, 0) + below + tied / 2
    assert {t: float(p) for t, p in points.items()} == {t: v / 3 for t, v in reference.items()}
    assert tiers == (("a",), ("b",), ("c",))
    assert borda([[["a"], ["b"]], [["b"], ["a"]]])[0] == (("a", "b"),)


def _rank(run, t):
    return next(i for i, tier in enumerate(run) if t in tier)


def test_run_agreement_is_tau_b_and_defined_when_a_run_ties_everything():
    assert run_agreement([["a"], ["b"], ["c"]], [["a"], ["b"], ["c"]]) == 1
    assert run_agreement([["a"], ["b"], ["c"]], [["c"], ["b"], ["a"]]) == -1
    assert run_agreement([["a", "b"]], [["b", "a"]]) == 1
    assert run_agreement([["a", "b"]], [["a"], ["b"]]) == 0
    assert run_agreement([["a", "b"], ["c"]], [["a"], ["b"], ["c"]]) == pytest.approx(
        2 / (2 * 3) ** 0.5)


EXAMPLE = Path(__file__).resolve().parents[2] / "graders.example.toml"


def test_profiles_come_from_the_file_named_by_gagar_graders(monkeypatch):
    monkeypatch.delenv("GAGAR_GRADERS", raising=False)
    assert list(load_profiles()) == ["heuristic"]
    monkeypatch.setenv("GAGAR_GRADERS", str(EXAMPLE))
    profiles = load_profiles()
    assert list(profiles) == ["heuristic", "grader-v3", "grader-v3-served", "tiny-cpu", "grader-v3-hybrid"]
    served = profiles["grader-v3-served"]
    assert (served.backend, served.url, served.k, served.queue) == (
        "openai", "http://grader-1:8000/v1", 3, "cpu")
    assert profiles["grader-v3"].queue == "gpu" and profiles["heuristic"].grader == "heuristic"
    assert profiles["grader-v3-hybrid"].grader == "hybrid"
    assert profiles["tiny-cpu"].grader == "hybrid"  # the README's tiny model falls back rather than failing


@pytest.mark.parametrize(("text", "message"), [
    ("[graders.x]\nbackend = 'vllm'\nmodel = '/m'\ncolour = 1\n",
     "graders.x.colour: unknown key (allowed: grader, backend, "),
    ("[graders.x]\nbackend = 'vllm'\nmodel = '/m'\nk = 'two'\n", "graders.x.k: must be an integer"),
    ("[graders.x]\nbackend = 'vllm'\nmodel = '/m'\nqueue = 'tpu'\n",
     "graders.x.queue: must be one of cpu, gpu, got 'tpu'"),
    ("[graders.x]\nmodel = '/m'\n", "graders.x.backend: required"),
    ("[graders.x]\nbackend = 'vllm'\n", "graders.x.model: required: a local model folder"),
    ("[graders.x]\nbackend = 'openai'\nmodel = 'm'\n", "graders.x.url: required for the openai"),
    ("[graders.x]\nbackend = 'tgi'\nmodel = '/m'\n",
     "graders.x.backend: unknown backend 'tgi' (known: openai, transformers, vllm, or module:Class)"),
    ("[graders.x]\ngrader = 'llm'\n",
     "graders.x.grader: unknown grader 'llm' (known: agentic, heuristic, hybrid, or module:Class)"),
    ("[graders.x]\nbackend = 'vllm'\nmodel = '/m'\nsampling = {temprature = 0.5}\n",
     "graders.x.sampling.temprature: unknown key (allowed: temperature, top_p, "),
    ("[graders.x]\nbackend = 'vllm'\nmodel = '/m'\nbudget = {max_turns = 2.5}\n",
     "graders.x.budget.max_turns: must be an integer"),
    ("[graders.x]\nbackend = 'vllm'\nmodel = '/m'\nsampling = {top_p = 2}\n",
     "graders.x.sampling: temperature must be >= 0 and top_p in"),
    ("[graders.heuristic]\ngrader = 'heuristic'\n", "graders.heuristic: 'heuristic' is built in"),
    ("[graders.x\n", "not valid TOML"),
    ("[models.x]\n", "models: unknown top-level key"),
])
def test_profile_errors_name_the_file_the_key_and_the_reason(tmp_path, text, message):
    path = tmp_path / "graders.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as error:
        load_profiles(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_a_profile_builds_its_grader(tiny_model, tmp_path):
    path = tmp_path / "graders.toml"
    path.write_text(f"[graders.tiny]\nbackend = 'transformers'\nmodel = '{tiny_model}'\n"
                    "k = 2\n[graders.tiny.budget]\nmax_turns = 1\nrationale_chars = 12\n"
                    "[graders.tiny.options]\nthreads = 1\n")
    built = build_grader(load_profiles(path)["tiny"])
    assert isinstance(built, AgenticGrader) and built.name == "tiny"
    grade = built.rank(make_group(passed=(True, True)))
    assert grade.grader == "tiny" and grade.version.endswith(":b1x32768r12:k2")


def test_a_profile_may_name_classes_that_load_only_when_its_grader_is_built(tmp_path):
    path = tmp_path / "graders.toml"
    path.write_text("[graders.x]\ngrader = 'gagar_nowhere:Grader'\n"
                    "[graders.y]\nbackend = 'gagar_nowhere:Backend'\nmodel = 'm'\n")
    profiles = load_profiles(path)
    with pytest.raises(GraderError, match="cannot load grader 'gagar_nowhere:Grader'"):
        build_grader(profiles["x"])
    with pytest.raises(GraderError, match="cannot load backend 'gagar_nowhere:Backend'"):
        build_grader(profiles["y"])


def test_the_heuristic_profile_builds_the_heuristic_grader():
    assert isinstance(build_grader(load_profiles(None)["heuristic"]), HeuristicGrader)
