"""The workspace's code tools for real: the calc codebase (tests/evidencedata.py) with each
candidate's patch applied, read with view_file, run with run_tests and run in the bwrap
sandbox (scripts/sandbox.sh installs it), under the environment's limits and the code budget.
"""

import json
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from grading.actions import action_char_bound, action_schema
from grading.backends import Backend, Reply, Sampling
from grading.cases import GroupCase, TrajectoryCase
from grading.code_access import CodeAccess
from grading.execution import Environment, Matrix
from grading.graders.agentic import AgenticGrader, Budget, run_seed, schema_errors
from grading.sandbox import BwrapSandbox, SandboxConfig, check_backend
from grading.sandbox.bwrap import SYSTEM_PATHS
from grading.sft import workspace_for
from grading.tool_limits import Caps
from grading.workspace import SYSTEM_PROMPT, Workspace
from grading.workspace_code import RUN_OUTPUT_BYTES, CodeTools
from tests import evidencedata
from tests.grading import agentic_fixtures as fx

HOSTILE = ("diff --git a/../outside.py b/../outside.py\nnew file mode 100644\n--- /dev/null\n"
           "+++ b/../outside.py\n@@ -0,0 +1 @@\n+print('out')\n")
NO_STORE = "no codebase store is configured (GAGAR_CODEBASES)"

tiny_model, tiny_backend = fx.tiny_model, fx.tiny_backend


@pytest.fixture(scope="module", autouse=True)
def bwrap_installed():
    check_backend(SandboxConfig("bwrap"))


@pytest.fixture(scope="module")
def sandbox(sandbox_python):
    return BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, str(sandbox_python.parents[1])))


@pytest.fixture(scope="module")
def codebase(tmp_path_factory):
    """The calc codebase, with two symlinks that lead out of it."""
    folder = tmp_path_factory.mktemp("codebase")
    evidencedata.write(folder, evidencedata.CODEBASE)
    (folder / "etc").symlink_to("/etc")
    (folder / "calc" / "secret.py").symlink_to("/etc/passwd")
    return folder


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    """The calc candidates and a hostile one, with (empty) execution evidence: the code is offered."""
    scratch = tmp_path_factory.mktemp("patches")
    trajectories = [TrajectoryCase(tid, passed, float(passed), evidencedata.diff(files, scratch / tid))
                    for tid, (passed, files) in evidencedata.CANDIDATES.items()]
    trajectories.append(TrajectoryCase("hostile", True, 1.0, HOSTILE))
    passed = {t.trajectory_id: t.passed for t in trajectories}
    return GroupCase("calc-1", "clamp(x, low, high) returns x unchanged: clamp it.", tuple(trajectories),
                     execution=Matrix(passed, ()))


@pytest.fixture
def environment(sandbox_python):
    return Environment.from_dict(evidencedata.environment(sandbox_python))


@pytest.fixture
def workroot():
    """Where the scratch folders go: a folder the sandbox's user may enter."""
    folder = Path(tempfile.mkdtemp(prefix="gagar-code-work-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def access(codebase, environment, sandbox, workroot):
    with CodeAccess(codebase, environment, sandbox, workroot) as opened:
        yield opened


def workspace(group, access, caps=Caps()) -> Workspace:
    return Workspace(group, seed=1, caps=caps, code=CodeTools(access, caps))


def call(ws: Workspace, tool: str, candidate: str, **args) -> str:
    return ws.run({"tool": tool, "label": ws.label_of(candidate), **args})


def test_view_file_shows_the_candidates_code(group, access):
    ws = workspace(group, access)
    good = call(ws, "view_file", "good", path="calc/ops.py", start=9, end=10)
    assert good.splitlines() == [f"=== {ws.label_of('good')}: calc/ops.py, lines 9..10 ===",
                                 "    9 def clamp(x, low, high):", "   10     return max(low, min(x, high))"]
    assert "   10     if x < low:" in call(ws, "view_file", "also_good", path="calc/ops.py", start=9, end=0)
    assert "return x\n" not in good
    first = call(ws, "view_file", "good", path="calc/ops.py", start=1, end=2)
    assert first.endswith("[more lines follow: view_file from 3]")
    root = call(ws, "view_file", "good", path="", start=1, end=0)
    assert root.splitlines()[1:] == ["calc/", "etc/", "tests/"]
    assert call(ws, "view_file", "good", path="tests/nope.py", start=1, end=0) == (
        f"error: {ws.label_of('good')}'s code has no file 'tests/nope.py'; view_file with a folder lists it")


@pytest.mark.parametrize("path, reason", [
    ("../codebase/calc/ops.py", "'..' leads out of the codebase"),
    ("/etc/passwd", "is absolute: paths are relative to the codebase's root"),
    ("etc/passwd", "leads through a symlink out of the codebase"),
    ("calc/secret.py", "leads through a symlink out of the codebase"),
])
def test_view_file_refuses_paths_out_of_the_tree(group, access, path, reason):
    ws = workspace(group, access)
    text = call(ws, "view_file", "good", path=path, start=1, end=0)
    assert text.startswith("error: ") and reason in text and "root:" not in text


def test_a_patch_that_would_write_outside_is_never_applied_read_or_run(group, access):
    ws = workspace(group, access)
    for tool, args in (("view_file", {"path": "calc/ops.py", "start": 1, "end": 0}),
                       ("run", {"command": "true"})):
        text = call(ws, tool, "hostile", **args)
        assert text.startswith(f"error: {ws.label_of('hostile')}'s patch cannot be applied to the codebase ("
                               "../outside.py: '..' in the path leaves the tree)")
    assert ws.code.runs_left == Caps().code_runs  # nothing ran


def test_run_tests_reports_each_candidates_pass_and_fail(group, access):
    ws = workspace(group, access)
    good = call(ws, "run_tests", "good", tests=["tests/test_ops.py"])
    assert good.startswith(f"{ws.label_of('good')}: run_tests tests/test_ops.py: passed in ")
    assert "tests: 2 pass\n  pass tests/test_ops.py::test_add\n  pass tests/test_ops.py::test_sub" in good
    broken = call(ws, "run_tests", "breaks", tests=["tests/test_ops.py::test_add", "tests/test_ops.py::test_sub"])
    assert ": failed (exit code 1) in " in broken
    assert "tests: 1 fail, 1 pass\n  fail tests/test_ops.py::test_add\n  pass tests/test_ops.py::test_sub" in broken
    assert broken.splitlines()[1] == f"[code budget left: {Caps().code_runs - 2} run(s), {ws.code.seconds_left:.1f} s]"
    # A test id is one quoted word of the command, never shell.
    quoted = call(ws, "run_tests", "good", tests=["tests/test_ops.py; echo INJECTED"])
    assert "file or directory not found: tests/test_ops.py; echo INJECTED" in quoted
    assert "\nINJECTED" not in quoted


def test_each_run_starts_from_the_candidates_code_and_has_no_network(group, access):
    ws = workspace(group, access)
    assert ": passed in " in call(ws, "run", "good", command="echo gone > calc/ops.py; cat calc/ops.py")
    assert "return max(low, min(x, high))" in call(ws, "run", "good", command="cat calc/ops.py")
    assert "return max(low, min(x, high))" in call(ws, "view_file", "good", path="calc/ops.py", start=1, end=0)
    offline = call(ws, "run", "good", command="python -c \"import socket; "
                                              "socket.create_connection(('1.1.1.1', 53), timeout=5)\"")
    assert ": failed (exit code 1)" in offline and "Network is unreachable" in offline


def test_a_run_is_cut_at_the_environments_time_limit(group, codebase, environment, sandbox, workroot):
    with CodeAccess(codebase, replace(environment, wall_seconds=2.0), sandbox, workroot) as access:
        ws = workspace(group, access)
        text = call(ws, "run", "good", command="sleep 100")
    assert text.startswith(f"{ws.label_of('good')}: run sleep 100: cut at 2.0 s, the environment's time limit "
                           "per run\n")


def test_the_code_budget_cuts_a_run_then_refuses_the_next(group, access):
    ws = workspace(group, access, Caps(code_seconds=3.0))
    assert ": cut at 3.0 s, the time left in the code budget" in call(ws, "run", "good", command="sleep 100")
    assert call(ws, "run_tests", "good", tests=["tests/test_ops.py"]) == (
        "error: the code budget is spent: its 3 s are used; nothing was run")
    ws = workspace(group, access, Caps(code_runs=1))
    assert ": passed in " in call(ws, "run", "good", command="true")
    assert call(ws, "run", "good", command="true") == (
        "error: the code budget is spent: 1 run(s) of 1 used; nothing was run")
    assert "return max" in call(ws, "view_file", "good", path="calc/ops.py", start=1, end=0)  # reading is free


def test_the_workers_deadline_cuts_a_run_then_refuses_the_next(group, codebase, environment, sandbox, workroot):
    with CodeAccess(codebase, environment, sandbox, workroot, deadline=time.monotonic() + 3) as access:
        ws = workspace(group, access)
        assert ", the worker's time left for code in this task\n" in call(ws, "run", "good", command="sleep 100")
        assert call(ws, "run", "good", command="true") == (
            "error: the worker's time for running code in this task is spent; nothing was run")
        assert "return max" in call(ws, "view_file", "good", path="calc/ops.py")


def test_outputs_are_capped_and_a_flood_is_killed(group, access):
    caps = Caps(output_chars=1200, log_chars=300)
    ws = workspace(group, access, caps)
    flood = call(ws, "run", "good", command="yes")
    assert f": killed: its output passed {RUN_OUTPUT_BYTES // 1024} KiB" in flood
    assert len(flood) <= caps.output_chars and "y\ny\ny" in flood
    long = call(ws, "run", "good", command="python -c \"print('x' * 5000)\"")
    assert "output, the last 300 of 5001 characters:" in long


def test_without_execution_evidence_the_code_tools_say_why_and_are_not_offered(group):
    bare = replace(group, execution=None, no_execution=NO_STORE)
    ws = Workspace(bare, seed=1)
    for tool, args in (("view_file", {"path": "calc/ops.py", "start": 1, "end": 0}),
                       ("run_tests", {"tests": ["tests/test_ops.py"]}), ("run", {"command": "ls"})):
        assert call(ws, tool, "good", **args) == f"error: {tool} is unavailable for this group: {NO_STORE}"
        assert schema_errors({"tool": tool, "label": "A", **args}, action_schema(ws, 20))
    assert ws.run({"tool": "run_all", "command": "ls"}) == f"error: run_all is unavailable for this group: {NO_STORE}"
    assert schema_errors({"tool": "run_all", "command": "ls"}, action_schema(ws, 20))
    system, user = ws.initial_messages()
    assert system["content"] == SYSTEM_PROMPT and '"tool": "view_file"' in SYSTEM_PROMPT
    assert f"Code: view_file, run_tests, run and run_all are unavailable for this group: {NO_STORE}." in user["content"]
    unreachable = Workspace(replace(group, no_code="its code cannot be had now: the store moved"), seed=1)
    assert call(unreachable, "run", "good", command="ls") == (
        "error: run is unavailable for this group: its code cannot be had now: the store moved")


def test_with_evidence_the_schema_offers_the_code_tools_within_the_reply_bound(group):
    ws = Workspace(group, seed=1)
    schema = action_schema(ws, 20)
    assert "Code: view_file, run_tests, run and run_all work on each candidate's code; they may run code 5 time(s), " \
           "60 s in all." in ws.initial_messages()[1]["content"]
    for action in ({"tool": "view_file", "label": "A", "path": "calc/ops.py", "start": 1, "end": 40},
                   {"tool": "run_tests", "label": "B", "tests": ["tests/test_ops.py::test_add"]},
                   {"tool": "run", "label": "C", "command": "python -c 'import calc'"},
                   {"tool": "run_all", "command": "python -c 'import calc'"}):
        assert schema_errors(action, schema) == []
    assert schema_errors({"tool": "run_all", "label": "A", "command": "ls"}, schema)
    assert schema_errors({"tool": "run_tests", "label": "A", "tests": []}, schema)
    assert schema_errors({"tool": "run", "label": "A", "command": 'echo "hi"'}, schema)
    assert schema_errors({"tool": "view_file", "label": "Z", "path": "x", "start": 1, "end": 1}, schema)
    longest = {"tool": "run_tests", "label": ws.labels[-1], "tests": ["t" * 160] * 8}
    assert schema_errors(longest, schema) == []
    assert len(json.dumps(longest)) <= action_char_bound(ws, 20, submit_only=False)


CLAMP_AND_ADD = "python -c 'from calc.ops import add, clamp; print(clamp(5, 0, 10), clamp(-1, 0, 10), add(0.5, 0.25))'"


def test_run_all_runs_one_command_on_the_reference_and_every_passing_candidate_grouping_their_outcomes(
        group, codebase, environment, sandbox, workroot, tmp_path):
    reference = evidencedata.diff({"calc/ops.py": evidencedata.FIXED}, tmp_path / "reference")
    with CodeAccess(codebase, environment, sandbox, workroot, reference_patch=reference) as access:
        ws = workspace(group, access)
        text = ws.run({"tool": "run_all", "command": CLAMP_AND_ADD})
    label = ws.label_of
    like_reference = sorted(label(c) for c in ("good", "good_copy", "also_good"))
    lines = text.splitlines()
    assert lines[0] == f"run_all {CLAMP_AND_ADD}: 6 run(s) in 3 distinct outcome(s)"
    assert lines[1].startswith(f"[code budget left: {Caps().code_runs - 1} run(s), ")  # one call of the budget
    outcomes = {line.split(": ")[0]: lines[i + 1:i + 3] for i, line in enumerate(lines)
                if ": passed in " in line}
    assert outcomes[", ".join(["reference", *like_reference])] == ["  output:", "5 0 0.75"]
    assert outcomes[label("breaks")] == ["  output:", "5 0 0"]          # add truncates
    assert outcomes[label("no_effect")] == ["  output:", "5 -1 0.75"]   # clamp does nothing
    assert (f"{label('hostile')}: its patch cannot be applied to the codebase (../outside.py: '..' in the path "
            "leaves the tree); not run") in lines
    assert label("fails") not in text  # failing candidates are context, not ranked


def test_run_all_without_a_reference_runs_the_candidates_and_says_so_and_stops_when_the_budget_is_spent(
        group, access):
    ws = workspace(group, access, Caps(code_seconds=2.5))
    text = ws.run({"tool": "run_all", "command": "sleep 1"})
    assert "(the task has no reference fix: the candidates alone)" in text
    assert "not run, the code budget's or the worker's time spent: " in text
    assert ws.run({"tool": "run_all", "command": "true"}) == (
        "error: the code budget is spent: its 2.5 s are used; nothing was run")
    assert ws.run({"tool": "run_all", "command": " "}) == "error: run_all needs a command"


def test_leaving_the_access_removes_every_tree_and_copy(group, codebase, environment, sandbox, workroot):
    with CodeAccess(codebase, environment, sandbox, workroot) as access:
        ws = workspace(group, access)
        call(ws, "view_file", "good", path="calc/ops.py", start=1, end=0)
        call(ws, "run", "breaks", command="true")
        assert len(list(workroot.glob("code-*/trees/*"))) == 2
    assert list(workroot.iterdir()) == []


class Scripted(Backend):
    """A model that runs the tests on one candidate, reads its code, then submits one tie."""

    model_id = "scripted"

    def __init__(self, label: str, passing):
        self.label, self.passing, self.conversations = label, list(passing), []

    def generate(self, conversations, schemas, sampling):
        self.conversations += [list(c) for c in conversations]
        return [Reply(self._next(c), prompt_tokens=10, completion_tokens=10) for c in conversations]

    def _next(self, conversation) -> str:
        turn = sum(m["role"] == "assistant" for m in conversation)
        actions = [{"tool": "run_tests", "label": self.label, "tests": ["tests/test_ops.py"]},
                   {"tool": "view_file", "label": self.label, "path": "calc/ops.py", "start": 1, "end": 3}]
        if turn < len(actions):
            return json.dumps(actions[turn])
        return json.dumps({"tool": "submit_ranking", "ranking": [self.passing],
                           "rationales": {lab: "tied" for lab in self.passing},
                           "flags": {lab: [] for lab in self.passing}})


def test_the_grader_runs_the_code_tools_and_the_sft_prompt_is_what_it_saw(group, access):
    given = replace(group, code=access)
    seen = Workspace(given, run_seed(0, given.group_id, 0))
    model = Scripted(seen.label_of("breaks"), seen.passing_labels)
    grade = AgenticGrader(model).rank(given)
    outputs = [entry for entry in grade.transcript if entry.get("role") == "tool"]
    assert [entry["tool"] for entry in outputs] == ["run_tests", "view_file"]
    assert "  fail tests/test_ops.py::test_add" in outputs[0]["content"]
    assert "    1 def add(a, b):\n    2     return int(a) + int(b)" in outputs[1]["content"]
    assert model.conversations[0] == workspace_for(group, 0).initial_messages()
    assert [set(tier) for tier in grade.tiers] == [{t.trajectory_id for t in group.passing}]  # the tie submitted


def test_the_tiny_model_decodes_code_tool_calls_under_the_schema(group, access, tiny_backend):
    """The random model under constrained decoding: every reply fits the schema that offers the
    code tools, and the code tools it picks run in the sandbox and answer."""
    groups = [replace(group, group_id=f"calc-{i}", code=access) for i in range(4)]
    grader = AgenticGrader(tiny_backend, sampling=Sampling(temperature=1.0, seed=3),
                           caps=Caps(output_chars=600, code_seconds=20.0),
                           budget=Budget(max_turns=6, min_turns=5, rationale_chars=16))
    called = []
    for given, grade in zip(groups, grader.rank_many(groups), strict=True):
        seen = {}
        for entry in grade.transcript:
            if entry.get("event") == "start":
                seen[entry["run"]] = Workspace(given, entry["seed"], grader.caps)
            elif entry.get("role") == "assistant" and entry["schema"] in ("any", "tools"):
                schema = action_schema(seen[entry["run"]], 16, submit=entry["schema"] == "any")
                assert schema_errors(json.loads(entry["content"]), schema) == []
            elif entry.get("role") == "tool" and entry["tool"] in ("view_file", "run_tests", "run"):
                called.append(entry)
    assert called, "the random model called no code tool"
    assert all(entry["content"] for entry in called)


LOOP = "".join(f"diff --git a/calc/{name} b/calc/{name}\nnew file mode 120000\n--- /dev/null\n+++ b/calc/{name}\n"
               f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
               for name, target in (("loop_a", "loop_b"), ("loop_b", "loop_a")))


@pytest.mark.parametrize("args, problem", [
    ({"path": "calc/" + "x" * 4995}, "path is 5000 characters long; at most 4096"),
    ({"path": "x" * 300}, f"{{label}}'s code cannot be read at '{'x' * 59}... (302 characters): File name too long"),
    ({"path": "calc/ops.py\0"}, "path holds a NUL character, which no path or command can"),
    ({"path": ["calc/ops.py"]}, "path must be a string, not ['calc/ops.py']"),
    ({"path": "calc/ops.py", "start": "one"}, "start must be a whole number, not 'one'"),
    ({"path": "calc/ops.py", "start": 1, "end": float("nan")}, "end must be a whole number, not nan"),
    ({"path": "calc/ops.py", "start": float("inf")}, "start must be a whole number, not inf"),
], ids=["5000-char path", "300-char name", "NUL in path", "path not text", "start a word", "end NaN",
        "start infinite"])
def test_a_bad_view_file_is_answered_and_the_conversation_goes_on(group, access, args, problem):
    ws = workspace(group, access)
    assert call(ws, "view_file", "good", **args) == f"error: {problem.format(label=ws.label_of('good'))}"
    assert "return max(low, min(x, high))" in call(ws, "view_file", "good", path="calc/ops.py")


def test_a_huge_line_number_shows_no_lines(group, access):
    ws = workspace(group, access)
    assert call(ws, "view_file", "good", path="calc/ops.py", start=10 ** 30, end=1e300) == (
        f"{ws.label_of('good')}: calc/ops.py has 10 line(s), none from line {10 ** 30}")


def test_a_loop_of_symlinks_is_answered(group, access):
    looped = replace(group, trajectories=(*group.trajectories, TrajectoryCase("loops", True, 1.0, LOOP)))
    ws = workspace(looped, access)
    label = ws.label_of("loops")
    for path in ("calc/loop_a", "calc/loop_a/x.py"):
        text = call(ws, "view_file", "loops", path=path)
        assert text.startswith("error: ") and text in (
            f"error: {path!r} leads into a loop of symlinks",  # Python 3.11, 3.12
            f"error: {label}'s code has no file {path!r}; view_file with a folder lists it")  # 3.13


@pytest.mark.parametrize("tool, args, problem", [
    ("run", {"command": 5}, "command must be a string, not 5"),
    ("run", {"command": "echo \0"}, "command holds a NUL character, which no path or command can"),
    ("run", {"command": "echo " + "x" * 200_000}, "command is 200005 characters long; at most 4096"),
    ("run_tests", {"tests": "tests/test_ops.py"}, "tests must be a list of test ids or files, "
                                                  "not 'tests/test_ops.py'"),
    ("run_tests", {"tests": ["tests/test_ops.py\0"]}, "a test holds a NUL character, which no path or command can"),
    ("run_tests", {"tests": ["t" * 4000] * 40}, "40 tests are too many for one run: name at most 4096 characters "
                                                "of tests"),
], ids=["command not text", "NUL in command", "200000-char command", "tests a string", "NUL in test",
        "160000 chars of tests"])
def test_a_bad_run_is_answered_runs_nothing_and_the_conversation_goes_on(group, access, tool, args, problem):
    ws = workspace(group, access)
    assert call(ws, tool, "good", **args) == f"error: {problem}"
    assert ws.code.runs_left == Caps().code_runs
    assert ": passed in " in call(ws, "run", "good", command="true")


def test_run_tests_reads_the_referees_record_not_a_summary_the_candidates_code_forges(environment, access):
    """An atexit handler that prints a passing short summary and exits 0: the grader's own test
    runs are read as the evidence pass reads them, and the tampering is said."""
    forged = ("import atexit\nimport os\n\nSUMMARY = ('= short test summary info =\\n'\n"
              "           'PASSED tests/test_ops.py::test_add\\n')\n"
              "atexit.register(lambda: (os.write(1, SUMMARY.encode()), os._exit(0)))\n")
    patch = evidencedata.diff({"calc/__init__.py": forged,
                               "calc/ops.py": evidencedata.BREAKS}, Path(tempfile.mkdtemp()) / "forger")
    forger = TrajectoryCase("forger", True, 1.0, patch)
    group = GroupCase("calc-2", "clamp it.", (forger,), execution=Matrix({"forger": True}, ()))
    ws = workspace(group, access)
    text = call(ws, "run_tests", "forger", tests=["tests/test_ops.py"])
    assert "tests: 1 fail, 1 pass" in text and "  fail tests/test_ops.py::test_add" in text
    assert "tampers with the test runner: the printed summary passes tests that did not pass: " \
           "tests/test_ops.py::test_add" in text
