"""Behaviour against the reference fix (issue 32, part 2): the functions the fix changes, traced
in the bwrap sandbox while the tests of the test patch run, on the reference and on candidates
that pass the reward's listed tests."""

import json
import os
import sys

import pytest

from grading.execution.examples import Example
from grading.execution.probes import Probe
from grading.execution.reports import read_referee, seat_referee
from grading.execution.selection import join_patches
from grading.execution.trace import (
    CALLS,
    MAX_CALLS,
    TRACER_SOURCE,
    Divergence,
    Target,
    TraceRecord,
    compare_traces,
    read_trace,
    seat_tracer,
    traced_functions,
    tracer_env,
)
from grading.sandbox import Limits, prepare_workdir
from tests.evidencedata import OPS
from tests.grading import probe_fixtures
from tests.grading.probe_fixtures import (
    ALIKE,
    CLAMPS_INVERTED,
    CODEBASE,
    INTERVAL_FIXED,
    REFERENCE,
    REWARD_TESTS,
    sandbox_side_imports,
)

codebase = probe_fixtures.codebase
patch_of = probe_fixtures.patch_of
test_patch = probe_fixtures.test_patch
bwrap_installed = probe_fixtures.bwrap_installed
sandbox = probe_fixtures.sandbox
environment = probe_fixtures.environment
workroot = probe_fixtures.workroot
probe = probe_fixtures.probe

CLAMP, INTERVAL_CLAMP = "calc/ops.py::clamp", "calc/interval.py::Interval.clamp"


@pytest.fixture(scope="module")
def targets(patch_of):
    return traced_functions(patch_of(REFERENCE), CODEBASE)


@pytest.fixture(scope="module")
def reference(probe, targets) -> Probe:
    return probe(REFERENCE, targets=targets)


def test_the_targets_are_the_method_and_the_function_whose_bodies_the_fix_changes(targets):
    assert targets == [Target("calc/interval.py", "Interval.clamp"), Target("calc/ops.py", "clamp")]


def test_functions_the_fix_adds_moves_or_only_comments_and_test_files_are_not_targets(patch_of):
    fix = OPS.replace("def add(a, b):\n", "def _ordered(low, high):\n    return min(low, high), max(low, high)\n\n\n"
                      "def add(a, b):\n    # sums\n")
    fix = fix.replace("    return x\n", "    low, high = _ordered(low, high)\n    return max(low, min(x, high))\n")
    patch = patch_of({"calc/ops.py": fix, "tests/test_ops.py": "def test_add():\n    assert True\n"})

    assert traced_functions(patch, {**CODEBASE, "tests/test_ops.py": ""}) == [Target("calc/ops.py", "clamp")]


def test_targets_are_bounded_and_a_fix_that_does_not_apply_to_the_base_has_none(patch_of):
    patch = patch_of(REFERENCE)

    assert traced_functions(patch, CODEBASE, limit=1) == [Target("calc/interval.py", "Interval.clamp")]
    assert traced_functions(patch, {**CODEBASE, "calc/ops.py": OPS.replace("return x", "return 0"),
                                    "calc/interval.py": "def broken(:\n"}) == []


def test_the_reference_run_records_each_call_of_its_targets_with_its_outcome(reference):
    assert reference.trace.loaded and reference.trace.problems == () and reference.notes == ()
    assert reference.trace.calls == {
        (INTERVAL_CLAMP, "self=Interval(0, 10), x=11"): ("returns 10",),
        (CLAMP, "x=-1, low=0, high=10"): ("returns 0",),
        (CLAMP, "x=11, low=0, high=10"): ("returns 10",),
        (CLAMP, "x=20, low=10, high=0"): ("raises ValueError",),
    }


def test_a_candidate_that_passes_the_listed_tests_but_not_a_call_they_make_diverges_on_that_call(
        probe, targets, reference):
    candidate = probe(CLAMPS_INVERTED, targets=targets)
    listed_only = probe(CLAMPS_INVERTED, targets=targets, tests=REWARD_TESTS)

    assert compare_traces(reference.trace, candidate.trace) == [
        Divergence(CLAMP, "x=20, low=10, high=0", "raises ValueError", "returns 10")]
    assert compare_traces(reference.trace, listed_only.trace) == []
    assert str(compare_traces(reference.trace, candidate.trace)[0]) == (
        "calc/ops.py::clamp(x=20, low=10, high=0): the reference raises ValueError, this one returns 10")


def test_a_candidate_written_otherwise_that_behaves_like_the_reference_has_no_divergence(probe, targets, reference):
    candidate = probe(ALIKE, targets=targets)

    assert candidate.trace.calls.keys() == reference.trace.calls.keys()
    assert compare_traces(reference.trace, candidate.trace) == []


def test_the_issue_examples_calls_are_traced_too(probe, targets):
    traced = probe(REFERENCE, targets=targets, tests=(),
                   examples=[Example("from calc.ops import clamp\nclamp(3, 5, 5)\n")])

    assert traced.trace.calls == {(CLAMP, "x=3, low=5, high=5"): ("returns 5",)}


def test_a_target_the_candidate_removed_is_missing_and_compares_nothing(probe, targets, reference):
    renamed = {"calc/ops.py": OPS.replace("def clamp(x, low, high):\n    return x\n",
                                          "def clamp_to(x, low, high):\n    return max(low, min(x, high))\n\n\n"
                                          "clamp = lambda x, low, high: clamp_to(x, low, high)  # noqa: E731\n"),
               "calc/interval.py": INTERVAL_FIXED.replace("def clamp(", "def clip(")}
    candidate = probe(renamed, targets=targets)

    assert candidate.trace.missing == (INTERVAL_CLAMP,)
    assert (CLAMP, "x=20, low=10, high=0") in candidate.trace.calls  # a lambda in its place is traced
    assert all(d.target == CLAMP for d in compare_traces(reference.trace, candidate.trace))


def test_huge_unprintable_and_address_bearing_results_are_recorded_bounded_and_alike_across_runs(probe, targets):
    hostile = {"calc/ops.py": OPS.replace("    return x\n", "    if x < 0:\n        return 'y' * 10**7\n"
                                          "    if x > 15:\n        return object()\n    return Unprintable()\n")
               + "\n\nclass Unprintable:\n    def __repr__(self):\n        raise RuntimeError('no')\n"}
    calls = probe(hostile, targets=targets).trace.calls

    assert calls[CLAMP, "x=-1, low=0, high=10"] == ("returns '" + "y" * 299 + "...",)
    assert calls[CLAMP, "x=11, low=0, high=10"] == ("returns <unrepresentable: RuntimeError>",)
    assert calls[CLAMP, "x=20, low=10, high=0"] == ("returns <object object at 0x?>",)


SWAPS_RECORD = """\
import glob, os
for record in glob.glob('t*/calls.jsonl'):
    os.remove(record)
    os.symlink('/etc/passwd', record)
"""
FORGES_RECORD = """\
import glob, json
for record in glob.glob('t*/calls.jsonl'):
    with open(record, 'a') as out:
        out.write('not json\\n')
        out.write(json.dumps({'event': 'call', 'target': 'elsewhere.py::f', 'args': '',
                              'outcome': 'returns 1'}) + '\\n')
        out.write(json.dumps({'event': 'call', 'target': 'calc/ops.py::clamp', 'args': 'x' * 5000,
                              'outcome': 'returns 1'}) + '\\n')
"""


def test_a_record_swapped_for_a_link_by_the_candidates_code_is_not_followed(probe, targets):
    trace = probe({**CLAMPS_INVERTED, "calc/__init__.py": SWAPS_RECORD}, targets=targets).trace

    assert trace.calls == {} and not trace.loaded
    assert trace.problems == ("the tracer's record was replaced (Too many levels of symbolic links)",)


def test_lines_the_candidates_code_forges_into_the_record_are_left_out_and_said(probe, targets, reference):
    trace = probe({**ALIKE, "calc/__init__.py": FORGES_RECORD}, targets=targets).trace

    assert trace.problems == tuple(f"the tracer's record holds a line it did not write (line {n})" for n in (2, 3, 4))
    assert trace.calls == reference.trace.calls


def test_a_record_past_its_size_or_calls_past_the_bound_are_not_kept(tmp_path):
    target = Target("calc/ops.py", "clamp")
    (tmp_path / CALLS).write_text("".join(json.dumps({"event": "call", "target": target.name, "args": f"x={i}",
                                                      "outcome": "returns 0"}) + "\n" for i in range(MAX_CALLS + 1)))
    assert len(read_trace(tmp_path, [target]).calls) == MAX_CALLS
    assert read_trace(tmp_path, [target]).problems == (f"calc/ops.py::clamp has more calls than the {MAX_CALLS} kept",)

    with open(tmp_path / CALLS, "ab") as record:
        record.truncate(17 * 1024**2)
    assert read_trace(tmp_path, [target]).problems == ("the tracer's record was written past 16 MiB",)
    os.remove(tmp_path / CALLS)
    os.mkfifo(tmp_path / CALLS)
    assert read_trace(tmp_path, [target]).problems == ("the tracer's record was replaced by something not a file",)


def test_a_call_with_two_outcomes_in_either_record_is_not_compared():
    varies = TraceRecord({(CLAMP, "x=1"): ("returns 1", "returns 2"), (CLAMP, "x=2"): ("returns 2",)})
    steady = TraceRecord({(CLAMP, "x=1"): ("returns 3",), (CLAMP, "x=2"): ("returns 3",)})

    assert compare_traces(varies, steady) == [Divergence(CLAMP, "x=2", "returns 2", "returns 3")]
    assert compare_traces(steady, varies) == [Divergence(CLAMP, "x=2", "returns 3", "returns 2")]
    assert TraceRecord.from_dict(json.loads(json.dumps(varies.to_dict()))) == varies


def test_the_tracer_loads_beside_the_referee_and_neither_disturbs_the_other(
        codebase, patch_of, test_patch, sandbox, environment, workroot, targets, reference):
    patch = join_patches(patch_of(REFERENCE), test_patch)
    workdir = workroot / "with-referee"
    prepare_workdir(codebase, patch, into=workdir)
    tracer, referee = seat_tracer(workdir, targets), seat_referee(workdir)
    script = f"{tracer_env(tracer)}\n{environment.test_script(['tests/test_clamp.py'], referee=referee)}"
    result = sandbox.run(workdir, script, Limits(wall_seconds=60))

    refereed = read_referee(workdir / referee, result, patch)
    assert refereed.status == "pass" and refereed.tampering == () and len(refereed.tests) == 4
    assert read_trace(workdir / tracer, targets).calls == reference.trace.calls


def test_the_tracer_is_python_3_6_of_the_standard_library_alone():
    assert sandbox_side_imports(TRACER_SOURCE) <= sys.stdlib_module_names
