"""The execution-evidence pass: each candidate's code run against the reward's tests, the whole
files of the task's test patch, the codebase's existing tests and its peers' tests, in the
sandbox, as a candidate x test matrix (docs/execution.md).

`Environment.from_dict` reads a task's `environment`; `plan_runs` says what to run for a
group (deduplicated by a cache key, capped by a `GroupBudget`); `run_planned` runs it
through a sandbox, resumably, within the group's time; `Matrix.build` joins the plan to
the outcomes, and `flaky`, `breaks_tests`, `fails_reward_files` and `tampers_with_tests` read
verdicts from it, the task's reference fix (the candidate `REFERENCE`) a control of them
(`reference_control`). Probes (`Plan.probes`, probes.py) trace the functions the reference fix
changes and run the statement's examples: `diverges_from_reference` and `example_differences`
read them. `CodebaseStore` gives a task's code, `task_execution` what else its
task says about running it.
"""

from grading.execution.codebases import Codebase, CodebaseStore, NoCodebase
from grading.execution.environment import Environment
from grading.execution.matrix import Matrix, MatrixRun, RunOutcome
from grading.execution.plan import (
    BASE,
    REFERENCE,
    Candidate,
    GroupBudget,
    Plan,
    PlannedProbe,
    PlannedRun,
    Skipped,
    applied_patch,
    plan_runs,
    run_key,
)
from grading.execution.probes import Probe
from grading.execution.reports import parse_pytest_summary
from grading.execution.runner import run_planned
from grading.execution.selection import PatchSplitError, named_after_touched_modules, split_patch
from grading.execution.task import TaskExecution, task_execution
from grading.execution.verdicts import (
    Control,
    breaks_tests,
    diverges_from_reference,
    example_comparisons,
    example_differences,
    failing_for_every_passing,
    fails_reward_files,
    flaky,
    reference_control,
    tampers_with_tests,
    trace_control,
)

__all__ = [
    "BASE", "REFERENCE", "Candidate", "Codebase", "CodebaseStore", "Control", "Environment", "GroupBudget", "Matrix",
    "MatrixRun", "NoCodebase", "PatchSplitError", "Plan", "PlannedProbe", "PlannedRun", "Probe", "RunOutcome",
    "Skipped", "TaskExecution",
    "applied_patch", "breaks_tests", "diverges_from_reference", "example_comparisons", "example_differences",
    "failing_for_every_passing", "fails_reward_files", "flaky", "named_after_touched_modules",
    "parse_pytest_summary", "plan_runs", "reference_control", "run_key", "run_planned", "split_patch",
    "tampers_with_tests", "task_execution", "trace_control",
]
