"""The probes in the evidence pass (issue 32): `plan_runs` plans the reference fix traced, the
base code and each passing candidate, `run_planned` runs them in the bwrap sandbox beside the
runs, and a candidate whose traced call ends otherwise than the reference's is flagged and
ranked below one that behaves like it, though both pass every test."""

import pytest

from grading.cases import GroupCase, TrajectoryCase
from grading.execution import (
    BASE,
    REFERENCE,
    Candidate,
    Matrix,
    Probe,
    Skipped,
    breaks_tests,
    diverges_from_reference,
    fails_reward_files,
    plan_runs,
    run_planned,
    trace_control,
)
from grading.execution.examples import statement_examples
from grading.execution.trace import Divergence, Target, calling_tests, traced_functions
from grading.graders.heuristic import HeuristicGrader
from grading.rankings import validate_ranking
from grading.workspace import Workspace
from tests.grading import probe_fixtures
from tests.grading.probe_fixtures import ALIKE, CLAMPS_INVERTED, CODEBASE, REWARD_TESTS
from tests.grading.probe_fixtures import REFERENCE as REFERENCE_FILES

codebase = probe_fixtures.codebase
patch_of = probe_fixtures.patch_of
bwrap_installed = probe_fixtures.bwrap_installed
sandbox = probe_fixtures.sandbox
environment = probe_fixtures.environment
workroot = probe_fixtures.workroot

# The test patch's file: the listed tests, and one the reward does not list that calls clamp with
# inverted bounds and takes any outcome, so that every candidate here passes every test.
TEST_CLAMP = probe_fixtures.TEST_CLAMP.replace('''def test_clamp_inverted():
    with pytest.raises(ValueError):
        clamp(20, 10, 0)
''', '''def test_clamp_inverted_ends():
    try:
        clamp(20, 10, 0)
    except ValueError:
        pass
''')
STATEMENT = "Interval.clamp returns x unchanged:\n\n```python\nfrom calc.interval import Interval\n" \
            "print(Interval(0, 10).clamp(11))\n```\n"
CLAMP = "calc/ops.py::clamp"


@pytest.fixture(scope="module")
def gathered(codebase, patch_of, sandbox, environment, workroot):
    """The plan of three passing candidates and one failing, run; (plan, matrix, patches)."""
    test_patch = patch_of({"tests/test_clamp.py": TEST_CLAMP})
    reference = patch_of(REFERENCE_FILES)
    patches = {"diverges": patch_of(CLAMPS_INVERTED), "alike": patch_of(ALIKE),
               "like_reference": reference, "fails": patch_of({"calc/ops.py": CODEBASE["calc/ops.py"]})}
    plan = plan_runs([Candidate(tid, patch, tid != "fails") for tid, patch in patches.items()],
                     codebase_id="calc", codebase_files=sorted(CODEBASE), environment=environment,
                     reward_tests=REWARD_TESTS, test_patch=test_patch, reference_patch=reference,
                     targets=traced_functions(reference, CODEBASE), examples=statement_examples(STATEMENT))
    outcomes, probes = {}, {}
    skipped = run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=environment,
                          on_result=lambda run, outcome: outcomes.__setitem__(run.key, outcome),
                          on_probe=lambda planned, probe: probes.__setitem__(planned.key, probe), seconds=300)
    assert skipped == []
    return plan, Matrix.build(plan, outcomes, (), probes), patches


def test_the_plan_probes_the_reference_the_base_and_each_passing_candidate_once_per_key(gathered):
    plan, matrix, _ = gathered
    assert [p.candidates for p in plan.probes] == [(REFERENCE, "like_reference"), (BASE,), ("diverges",), ("alike",)]
    base = plan.probes[1]
    assert base.patch == "" and base.tests == () and base.targets == () and len(base.examples) == 1
    assert all(p.tests == ("tests/test_clamp.py",) and p.targets for p in plan.probes if p is not base)
    assert set(matrix.probes) == {REFERENCE, BASE, "diverges", "alike", "like_reference"}


def test_a_candidate_that_passes_every_test_but_ends_a_traced_call_otherwise_is_flagged_and_ranked_below(
        gathered, patch_of):
    _, matrix, patches = gathered
    assert breaks_tests(matrix) == {} and fails_reward_files(matrix) == {}  # every test passes for all three
    assert trace_control(matrix) == ""
    assert diverges_from_reference(matrix) == {
        "diverges": [Divergence(CLAMP, "x=20, low=10, high=0", "raises ValueError", "returns 10")]}

    case = GroupCase("g", STATEMENT, tuple(TrajectoryCase(tid, tid != "fails", float(tid != "fails"), patch)
                                           for tid, patch in patches.items()), execution=matrix)
    grade = HeuristicGrader().rank(case)
    validate_ranking(grade.tiers, ["diverges", "alike", "like_reference"], grade.flags)
    assert grade.tiers[-1] == ("diverges",)
    assert grade.flags["diverges"] == ("diverges_from_reference",) and "alike" not in grade.flags
    assert ("1 traced call(s) end otherwise than the reference fix's: calc/ops.py::clamp(x=20, low=10, high=0): "
            "the reference raises ValueError, this one returns 10") in grade.rationales["diverges"]
    # Without the trace, the leaner candidate ranks first.
    untraced = HeuristicGrader().rank(GroupCase("g", STATEMENT, case.trajectories))
    assert untraced.tiers[0] == ("diverges",)


def test_the_matrix_keeps_its_probes_and_examples_when_stored_and_one_stored_before_them_loads(gathered):
    _, matrix, _ = gathered
    again = Matrix.from_dict(matrix.to_dict())
    assert again.probes == matrix.probes and again.examples == matrix.examples
    assert isinstance(again.probes[BASE], Probe) and again.probes[BASE].examples.outcomes[0].output == "11\n"
    old = {key: value for key, value in matrix.to_dict().items() if key not in ("probes", "examples")}
    assert Matrix.from_dict(old).probes == {} and Matrix.from_dict(old).examples == ()


def test_without_a_reference_fix_nothing_is_traced_and_the_matrix_says_so(codebase, patch_of, environment):
    plan = plan_runs([Candidate("diverges", patch_of(CLAMPS_INVERTED), True)], codebase_id="calc",
                     codebase_files=sorted(CODEBASE), environment=environment, reward_tests=REWARD_TESTS,
                     targets=traced_functions(patch_of(REFERENCE_FILES), CODEBASE))
    assert plan.probes == ()
    matrix = Matrix.build(plan, {}, tuple(Skipped(run.suite, run.candidates, "not run here") for run in plan.runs))
    assert diverges_from_reference(matrix) == {}
    assert trace_control(matrix).startswith("no reference fix: the trace against it needs one")


def test_the_workspace_shows_the_diverging_call_and_the_examples_by_label(gathered):
    _, matrix, patches = gathered
    case = GroupCase("g", STATEMENT, tuple(TrajectoryCase(tid, tid != "fails", float(tid != "fails"), patch)
                                           for tid, patch in patches.items()), execution=matrix)
    workspace = Workspace(case, seed=2)
    text = workspace.evidence_execution()
    assert "diverges" not in text.replace(workspace.label_of("diverges"), "")
    assert (f"{workspace.label_of('diverges')}: calc/ops.py::clamp(x=20, low=10, high=0): the reference raises "
            "ValueError, this one returns 10") in text
    assert "Example 1:\nfrom calc.interval import Interval\nprint(Interval(0, 10).clamp(11))" in text
    assert "  the base code: 11\n  the reference fix: 10\n" in text
    assert f"  {workspace.label_of('alike')}: 10" in text


def test_a_divergence_only_the_codebases_own_tests_reach_is_found_in_the_test_files_that_call_the_changed_functions(
        codebase, patch_of, sandbox, environment, workroot):
    """The test patch calls clamp only within its bounds; the codebase's tests/test_bounds.py
    calls it with inverted ones, where the reference raises and `diverges` returns a bound."""
    within_bounds = TEST_CLAMP.split("\n\ndef test_clamp_inverted_ends")[0] + "\n"
    test_patch, reference = patch_of({"tests/test_clamp.py": within_bounds}), patch_of(REFERENCE_FILES)
    targets = traced_functions(reference, CODEBASE)
    calling = calling_tests(targets, codebase, sorted(CODEBASE), skip=["tests/test_clamp.py"])
    assert calling == ["tests/test_bounds.py"]

    def divergences(calling_tests):
        plan = plan_runs([Candidate("diverges", patch_of(CLAMPS_INVERTED), True)], codebase_id="calc",
                         codebase_files=sorted(CODEBASE), environment=environment, reward_tests=REWARD_TESTS,
                         test_patch=test_patch, reference_patch=reference, targets=targets,
                         calling_tests=calling_tests)
        outcomes, probes = {}, {}
        run_planned(plan, codebase=codebase, sandbox=sandbox, workroot=workroot, environment=environment,
                    on_result=lambda run, outcome: outcomes.__setitem__(run.key, outcome),
                    on_probe=lambda planned, probe: probes.__setitem__(planned.key, probe), seconds=300)
        return diverges_from_reference(Matrix.build(plan, outcomes, (), probes))

    assert divergences(()) == {}  # the test patch's file alone never reaches the difference
    assert divergences(calling) == {
        "diverges": [Divergence(CLAMP, "x=30, low=20, high=5", "raises ValueError", "returns 20")]}


def test_the_files_that_call_the_changed_functions_most_come_first_and_a_constructor_is_called_by_its_class(
        tmp_path):
    files = {"pkg/tests/test_many.py": "f(1)\nf(2)\nobj.f (3)\n", "pkg/tests/test_one.py": "f(1)\nfx(2)\n",
             "pkg/tests/test_none.py": "fx(1)\n", "pkg/tests/conftest.py": "f(1)\nf(1)\nf(1)\nf(1)\n",
             "pkg/tests/test_make.py": "Thing(1)\n", "pkg/mod.py": "f(1)\nf(1)\nf(1)\nf(1)\n"}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    targets = [Target("pkg/mod.py", "f"), Target("pkg/mod.py", "Thing.__init__")]
    assert calling_tests(targets, tmp_path, sorted(files)) == [
        "pkg/tests/test_many.py", "pkg/tests/test_make.py", "pkg/tests/test_one.py"]
    assert calling_tests(targets, tmp_path, sorted(files), skip=["pkg/tests/test_many.py"], limit=1) == [
        "pkg/tests/test_make.py"]
    assert calling_tests([], tmp_path, sorted(files)) == []
