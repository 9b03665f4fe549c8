"""What the execution-evidence pass costs, and what it catches, on the sample codebase.

    .venv/bin/python bench/evidence.py [--python /usr/bin/python3] [--rounds 3]

1. Cost: a group of 16 candidates on the sample codebase (sample/evidence.jsonl's
   invoicekit-101, its clean fix repeated with 12 different comments, so that no two runs
   share a key): every planned run (the reward's tests, the existing tests of parsing.py, a
   peer's tests) through the bwrap sandbox, cold (nothing stored) and cached (every outcome
   stored: what a second pass or another group with the same runs costs: the plan, with the
   codebase from the store's cache, and the matrix), against the floor:
   the same runs done directly, each in a fresh copy with its patch applied, no sandbox. The
   median of `--rounds` rounds, taken in turn. The ratio sandboxed / floor is the sandbox's
   overhead.
2. Catch: the sample's evidence groups, each planted lucky pass (a fix that breaks what the
   reward misses, a patch with no effect that a flaky evaluation passed) and each correct
   passing candidate: how many of each the evidence flags (breaks_tests, or a pass that does
   not reproduce).

The interpreter runs the sample's tests and needs pytest: Debian's python3-pytest for the
system's python3 (scripts/evidence_demo.sh installs it), or a virtual environment outside
/tmp named with --python (its folder is shown to the sandbox).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grading.execution import (  # noqa: E402  (the path above)
    Candidate,
    CodebaseStore,
    Matrix,
    breaks_tests,
    flaky,
    plan_runs,
    run_planned,
    task_execution,
)
from grading.sandbox import BwrapSandbox, check_backend, prepare_workdir  # noqa: E402
from grading.sandbox.bwrap import SYSTEM_PATHS  # noqa: E402
from grading.sandbox.config import SandboxConfig  # noqa: E402

SAMPLE = ROOT / "sample"
PLANTED = ("breaks_behaviour", "no_effect")  # the sample's lucky passes, by meta.variant


def groups(python: str) -> dict[str, list[dict]]:
    """The evidence sample's records by group, their task on every line, run by `python`."""
    out: dict[str, list[dict]] = {}
    for line in (SAMPLE / "evidence.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        out.setdefault(record["group_id"], []).append(record)
    for records in out.values():
        task = records[0]["task"]
        task["environment"] = {**task["environment"], "python": python}
        for record in records:
            record["task"] = task
    return out


def sixteen(records: list[dict]) -> list[dict]:
    """invoicekit-101 grown to 16 candidates: its clean fix again with 12 different comments."""
    clean = next(r for r in records if r["trajectory_id"] == "r1")
    copies = [{**clean, "trajectory_id": f"c{i:02d}",
               "patch": clean["patch"].replace("# thousands separators", f"# thousands separators ({i})")}
              for i in range(12)]
    return records + copies


def plan_of(records, store: CodebaseStore):
    task = records[0]["task"]
    codebase = store.checkout(snapshot=task["snapshot"])
    execution = task_execution(task)
    candidates = [Candidate(r["trajectory_id"], r["patch"], r["reward"] >= 1.0) for r in records]
    plan = plan_runs(candidates, codebase_id=codebase.id, codebase_files=codebase.files,
                     environment=execution.environment, reward_tests=execution.reward_tests,
                     test_patch=execution.test_patch)
    return plan, codebase, execution.environment


def sandboxed(plan, codebase, environment, sandbox, workroot, done=None) -> tuple[float, dict]:
    outcomes = dict(done or {})
    started = time.perf_counter()
    skipped = run_planned(plan, codebase=codebase.path, sandbox=sandbox, workroot=workroot,
                          environment=environment, seconds=1800, done=set(outcomes),
                          on_result=lambda run, outcome: outcomes.__setitem__(run.key, outcome))
    Matrix.build(plan, outcomes, tuple(skipped))
    return time.perf_counter() - started, outcomes


def floor(plan, codebase, environment, workroot) -> float:
    """The same runs without the sandbox: a fresh copy, the patch, the test command."""
    started = time.perf_counter()
    for run in {run.key: run for run in plan.runs}.values():
        workdir = prepare_workdir(codebase.path, run.patch, into=workroot / f"floor-{run.key}")
        subprocess.run(["sh", "-c", environment.test_script(run.tests)], cwd=workdir, capture_output=True,
                       env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8"})
        shutil.rmtree(workdir)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if subprocess.run([args.python, "-c", "import pytest"], capture_output=True).returncode:
        sys.exit(f"{args.python} has no pytest: install python3-pytest (scripts/evidence_demo.sh) or give --python")
    check_backend(SandboxConfig("bwrap"))
    extra = () if Path(args.python).is_relative_to("/usr") else (str(Path(args.python).parents[1]),)
    sandbox = BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, *extra))
    work = Path(tempfile.mkdtemp(prefix="gagar-bench-evidence-", dir="/var/tmp"))
    work.chmod(0o755)
    try:
        store = CodebaseStore(SAMPLE, work / "codebases")
        by_group = groups(args.python)
        plan, codebase, environment = plan_of(sixteen(by_group["invoicekit-101"]), store)
        runs = len({run.key for run in plan.runs})
        cold, bare, cached, outcomes = [], [], [], {}
        for _ in range(args.rounds):
            bare.append(floor(plan, codebase, environment, work))
            seconds, outcomes = sandboxed(plan, codebase, environment, sandbox, work)
            cold.append(seconds)
            # A pass whose runs are all stored: the plan (the codebase from the store's cache) and the matrix.
            started = time.perf_counter()
            again = plan_of(sixteen(by_group["invoicekit-101"]), store)
            sandboxed(*again, sandbox, work, done=outcomes)
            cached.append(time.perf_counter() - started)
        cells = sum(len(outcome.tests) for outcome in outcomes.values())
        cold_s, bare_s, cached_s = (statistics.median(values) for values in (cold, bare, cached))
        print(f"16 candidates, {runs} runs, {cells} test results (median of {args.rounds} rounds)")
        print(f"  floor, no sandbox:  {bare_s:6.2f} s   {bare_s / 16:.3f} s a candidate  "
              f"{bare_s / cells * 1000:.1f} ms a test")
        print(f"  sandboxed, cold:    {cold_s:6.2f} s   {cold_s / 16:.3f} s a candidate  "
              f"{cold_s / cells * 1000:.1f} ms a test   {cold_s / bare_s:.2f}x the floor")
        print(f"  sandboxed, cached:  {cached_s:6.3f} s   {cached_s / 16 * 1000:.2f} ms a candidate "
              "(planned again, every outcome stored)")

        planted = correct = planted_flagged = correct_flagged = 0
        for group_id, records in by_group.items():
            plan, codebase, environment = plan_of(records, store)
            _, outcomes = sandboxed(plan, codebase, environment, sandbox, work)
            matrix = Matrix.build(plan, outcomes)
            flagged = set(breaks_tests(matrix)) | {c for c in flaky(matrix) if matrix.passed[c]}
            for record in records:
                if record["reward"] < 1.0:
                    continue
                lucky = record["meta"]["variant"] in PLANTED
                planted += lucky
                correct += not lucky
                planted_flagged += lucky and record["trajectory_id"] in flagged
                correct_flagged += not lucky and record["trajectory_id"] in flagged
            print(f"  {group_id}: flagged {sorted(flagged) or 'none'}")
        print(f"planted lucky passes flagged: {planted_flagged} of {planted}; "
              f"correct passing candidates flagged: {correct_flagged} of {correct}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
