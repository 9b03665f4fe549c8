"""Execution evidence: launched with a grading, gathered in a worker, stored per group.

Before a group whose task names a codebase is graded, a worker runs its candidates' code
against the reward's tests, the whole files of the task's test patch, the codebase's existing
tests and the tests the candidates wrote, in the sandbox, with the task's reference fix run as a
control of the first two, and probes: the functions the reference fix changes traced on it and
on each passing candidate, and the statement's examples run on those and the base code
(docs/execution.md, grading/execution/). What comes of it, the candidate x test matrix with its
probes and the verdicts read from it (`breaks_tests`, `flaky`), is stored on the group
(GroupEvidence), every run's outcome by its key (EvidenceRun) and every probe's (EvidenceProbe):
another group, or this one after its worker was lost, never runs it again.

A pass is claimed work (webapp/work.py, `EVIDENCE`): launched by `evidence_launch` (a
grading launch calls it), claimed by `evidence_process`, swept by `evidence_sweep`. Its
gradings wait for it (`GRADINGS.waits` in webapp/grading/services.py, which webapp/work.py
applies): while the pass is PENDING they are not due, so nothing sends, claims or sweeps them.
The evidence task sends them once the pass is OVER (`gradings_release`), and the grading
sweep does should that message be lost or the pass end in its own sweep (out of attempts):
a pass holds its gradings until it ends, however it ends. A pass bounded by the group's budget
(GAGAR_EVIDENCE_SECONDS, _RUNS, _EXISTING_FILES) ends `done` with what it ran and what it
skipped; a task that cannot be run here ends `none`, with the reason the group page shows; a
machine that cannot run the candidates' code ends it `failed`, saying so, and stores no outcome.
The reasons and errors a pass stores are shown to every role: the deployment's folders in them
are named by their settings (`$GAGAR_DATA_DIR`), and the worker's log has them whole.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F
from django.utils import timezone

from grading.execution import (
    Candidate,
    Codebase,
    CodebaseStore,
    GroupBudget,
    Matrix,
    NoCodebase,
    PatchSplitError,
    RunOutcome,
    TaskExecution,
    breaks_tests,
    flaky,
    plan_runs,
    run_planned,
    task_execution,
)
from grading.execution.environment import Environment
from grading.execution.examples import statement_examples
from grading.execution.probes import Probe
from grading.execution.runner import MachineError
from grading.execution.selection import runnable_test_files
from grading.execution.trace import calling_tests, traced_in
from grading.sandbox import (
    Limits,
    Sandbox,
    SandboxConfig,
    SandboxConfigError,
    check_backend,
    make_sandbox,
    remove_tree,
)
from grading.sandbox.bwrap import SYSTEM_PATHS
from grading.sandbox.limits import PASSED
from webapp import work
from webapp.bulk import insert_rows
from webapp.cases import NAMES_CODEBASE
from webapp.jobs import CPU, EVIDENCE_TASK
from webapp.models import EvidenceProbe, EvidenceRun, Group, GroupEvidence, Trajectory

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, NONE = (GroupEvidence.Status.QUEUED, GroupEvidence.Status.RUNNING,
                                       GroupEvidence.Status.DONE, GroupEvidence.Status.FAILED,
                                       GroupEvidence.Status.NONE)
PENDING = (QUEUED, RUNNING)  # a pass in these holds its group's gradings back
OVER = (DONE, FAILED, NONE)
ERROR_CHARS = 4000
CHUNK = 5000  # group pks per query: SQLite takes up to 32766 parameters in a statement

EVIDENCE = work.Claimed(kind="evidence", model=GroupEvidence, task=EVIDENCE_TASK,
                        messages=lambda pks: [{"group_id": pk} for pk in pks])


class ClaimLost(Exception):
    """The pass was swept and claimed again meanwhile: this worker stops writing."""


def evidence_enabled() -> bool:
    return bool(settings.GAGAR_CODEBASES)


def evidence_off_reason() -> str:
    """What a launch says when this instance gathers no evidence, "" when it does."""
    if evidence_enabled():
        return ""
    return ("execution evidence is off on this instance (no GAGAR_CODEBASES in the environment or in "
            "GAGAR_DATA_DIR/instance.env): the groups are graded without running their code")


def evidence_launch(*, group_pks: Sequence[int]) -> work.Sending:
    """Queue the evidence pass of each of `group_pks` whose task names a codebase, unless it
    has one queued, running or done; one that failed or found none is queued again (the
    store may have the codebase now). Nothing when no codebase store is configured. Call it in
    the transaction that queues the gradings: they wait for it."""
    if not evidence_enabled():
        return work.Sending()
    now = timezone.now()
    queued: list[int] = []
    pks = sorted(set(group_pks))
    for start in range(0, len(pks), CHUNK):
        chunk = pks[start:start + CHUNK]
        named = Group.objects.filter(NAMES_CODEBASE, pk__in=chunk)
        again = list(GroupEvidence.objects.filter(group__in=named, status__in=(FAILED, NONE))
                     .values_list("pk", flat=True))
        GroupEvidence.objects.filter(pk__in=again).update(
            status=QUEUED, reason="", error="", lowered="", attempts=0, claim_token="", queued_at=now, sent_at=None,
            finished_at=None, lease_expires_at=None, spent_s=0.0)
        new = list(named.filter(evidence__isnull=True).values_list("pk", flat=True))
        insert_rows(GroupEvidence, [{"group_id": pk, "status": QUEUED, "reason": "", "codebase": "", "matrix": None,
                                     "breaks": {}, "flaky": {}, "breaks_tests": False, "lowered": "", "spent_s": 0.0,
                                     "attempts": 0, "claim_token": "", "error": "", "queued_at": now}
                                    for pk in new])
        queued += again + new
    if not queued:
        return work.Sending()
    return work.send_claimed_after_commit(EVIDENCE, [(pk, CPU) for pk in sorted(queued)])


def evidence_sweep(*, resend_after: float | None = None) -> work.Sweep:
    """The sweep of evidence passes (webapp/work.py's `sweep`), and of the work root's leftovers."""
    _leftovers_remove()
    return work.sweep(EVIDENCE, resend_after=resend_after)


def _leftovers_remove() -> None:
    """Remove what workers killed mid-run left in the work root: a pass's run folder, a
    grader's candidates' trees. A folder in use was made by its task, within the task's hard
    time limit, so one made before both kinds' limits is nobody's. Made: its ctime, which
    `cp -a` (keeping the codebase's mtime) and a candidate's code cannot set back."""
    root = _data() / "runs"
    if not root.is_dir():  # no pass or code tool ran here: nothing to make
        return
    oldest = time.time() - max(work.setting("evidence", "TIME_LIMIT"), work.setting("grading", "TIME_LIMIT"))
    for entry in root.iterdir():
        try:
            made = entry.lstat().st_ctime
        except FileNotFoundError:  # a run that ended meanwhile took its folder and lock away
            continue
        if made >= oldest:
            continue
        log.warning("evidence: removing %s, left by a worker that stopped mid-run", entry)
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink()


# --- in a worker ----------------------------------------------------------------------------

def sandbox_config(environment: Environment | None = None) -> SandboxConfig:
    """The deployment's sandbox (GAGAR_SANDBOX...), for `environment`'s image if it names one."""
    if settings.GAGAR_SANDBOX == "command":
        image = environment.image if environment is not None and environment.image else ""
        return SandboxConfig("command", template=settings.GAGAR_SANDBOX_TEMPLATE, image=image,
                             pass_env=tuple(settings.GAGAR_SANDBOX_ENV))
    return SandboxConfig(settings.GAGAR_SANDBOX,
                         readonly_paths=(*SYSTEM_PATHS, *settings.GAGAR_SANDBOX_PATHS))


def evidence_check_sandbox() -> None:
    """At a worker's start, when evidence is on: SandboxConfigError, with the reason, unless
    the configured sandbox can run here (bwrap installed, a container runtime that runs) and,
    with bwrap, its user reaches the run folders: a trial run where the runs go. Otherwise every
    run of every pass would fail the same way, the machine's fault and no candidate's."""
    if not evidence_enabled():
        return
    config = sandbox_config()
    check_backend(config)
    if config.backend == "bwrap":
        _trial_run(make_sandbox(config))


def _trial_run(sandbox: Sandbox) -> None:
    try:
        root = workroot()
        trial = Path(tempfile.mkdtemp(prefix="trial-", dir=root))
    except OSError as error:
        raise SandboxConfigError(f"the run folders cannot be made: {error}") from None
    try:
        trial.chmod(0o755)  # as the runner makes a run's folder
        (trial / "work").mkdir()
        result = sandbox.run(trial / "work", ["true"], Limits(wall_seconds=60))
    finally:
        remove_tree(trial)
    if result.status != PASSED:
        raise SandboxConfigError(f"a trial run in the run folders ({root}) did not pass ({result.status}): "
                                 f"{result.output.strip()}; the sandbox's user must be let through every "
                                 "folder above them (mode 755)")


def evidence_process(*, group_id: int) -> str:
    """Claim the queued pass of group `group_id`, gather its evidence, store it. Its status
    once over (done, none or failed; queued when it is to be tried again); "" when there was
    nothing to claim."""
    token = work.new_token()
    now = timezone.now()
    with transaction.atomic():
        if not work.claim(EVIDENCE, [group_id], token, now, finished_at=None):
            return ""
    mine = GroupEvidence.objects.filter(pk=group_id, status=RUNNING, claim_token=token)
    with work.lease_renewed(EVIDENCE, lambda: mine, f"evidence-{token[:8]}"):
        try:
            fields = _gather(group_id, mine)
        except NoCodebase as missing:
            log.info("no evidence for group %s: %s", group_id, missing)
            fields = {"status": NONE, "reason": _path_free(str(missing))}
        except (SandboxConfigError, PatchSplitError) as error:
            log.info("no evidence for group %s: %s: %s", group_id, type(error).__name__, error)
            fields = {"status": NONE, "reason": _path_free(f"{type(error).__name__}: {error}")}
        except MachineError as error:
            # Not queued again: the same machine would fail the same way at once. A worker that
            # cannot run any sandbox stops at its start (evidence_check_sandbox); the next
            # grading launch queues this pass again.
            log.error("evidence of group %s: the machine could not run the candidates' code: %s: %s",
                      group_id, error, error.detail)
            fields = {"status": FAILED, "error": f"the worker's machine could not run the candidates' code: "
                                                 f"{error} (not the candidates' doing; the worker's log has "
                                                 "the detail)"}
        except ClaimLost:
            return ""
        except SoftTimeLimitExceeded:
            # What ran is stored: the next attempt goes on from there.
            return work.attempt_lost(EVIDENCE, group_id, token, "ran past its soft time limit", timezone.now())
        except (OperationalError, InterfaceError):
            raise  # weather: the lease runs out and the sweep queues it again
        except Exception as error:  # a bug, not weather: trying again will not help
            log.exception("evidence of group %s", group_id)
            fields = {"status": FAILED, "error": _path_free(f"{type(error).__name__}: {error}")}
    written = mine.update(**fields, finished_at=timezone.now(), lease_expires_at=None)
    return fields["status"] if written else ""


def _path_free(text: str) -> str:
    """`text` with the deployment's folders named by their settings (at most ERROR_CHARS): a
    pass's reason or error is shown to every role, and the worker's log has it whole."""
    folders = {str(settings.DATA_DIR): "$GAGAR_DATA_DIR"}
    if settings.GAGAR_CODEBASES:
        store = Path(settings.GAGAR_CODEBASES)
        folders |= {str(store): "$GAGAR_CODEBASES", str(store.resolve()): "$GAGAR_CODEBASES"}
    for folder in sorted(folders, key=len, reverse=True):  # the store may lie in the data folder
        text = text.replace(folder, folders[folder])
    return text[:ERROR_CHARS]


@dataclass(frozen=True)
class GroupCode:
    """What running a group's candidates takes: its codebase, what its task says about running
    it, and the sandbox to run it in."""

    codebase: Codebase
    execution: TaskExecution
    sandbox: Sandbox
    lowered: str = ""  # what the deployment lowered of the task's environment, said for the group page
    reference_patch: str = ""  # the task's own fix, "" when it has none


def group_code(group_id: int, *, trajectory_tests: Iterable[Mapping | None] = ()) -> GroupCode:
    """The code of group `group_id` and how to run it, for its evidence pass and for a grader that
    runs its candidates' code (webapp/grading/worker.py); `trajectory_tests` (the trajectories'
    `tests`) name the reward's tests when the task does not. Raises NoCodebase, with the reason,
    when it cannot be had here."""
    if not evidence_enabled():
        raise NoCodebase("no codebase store is configured (GAGAR_CODEBASES)")
    group = Group.objects.values("repo", "base_commit", "task_extra", "reference_patch").get(pk=group_id)
    task = group["task_extra"] or {}
    store = CodebaseStore(Path(settings.GAGAR_CODEBASES), _data() / "codebases")
    codebase = store.checkout(repo=group["repo"], base_commit=group["base_commit"],
                              snapshot=task.get("snapshot") or "")
    execution = task_execution(task, store_environment=store.environment(group["repo"]),
                               trajectory_tests=trajectory_tests)
    environment, lowered = _capped(execution.environment)
    return GroupCode(codebase, replace(execution, environment=environment), _sandbox(environment), lowered,
                     group["reference_patch"] or "")


def _capped(environment: Environment) -> tuple[Environment, str]:
    """`environment` within the deployment's caps on each run (GAGAR_SANDBOX_MAX_MEMORY_MB,
    GAGAR_SANDBOX_MAX_WALL_SECONDS), and what was lowered ("" when nothing): a task's uploader
    may ask for 64 GiB and an hour a run, more than a worker may give."""
    memory_mb = min(environment.memory_mb, settings.GAGAR_SANDBOX_MAX_MEMORY_MB)
    wall_seconds = min(environment.wall_seconds, settings.GAGAR_SANDBOX_MAX_WALL_SECONDS)
    lowered = []
    if memory_mb < environment.memory_mb:
        lowered.append(f"memory from {environment.memory_mb} MB to {memory_mb} MB (GAGAR_SANDBOX_MAX_MEMORY_MB)")
    if wall_seconds < environment.wall_seconds:
        lowered.append(f"time from {environment.wall_seconds:g} s to {wall_seconds:g} s "
                       "(GAGAR_SANDBOX_MAX_WALL_SECONDS)")
    if not lowered:
        return environment, ""
    return (replace(environment, memory_mb=memory_mb, wall_seconds=wall_seconds),
            f"The task's limits per run were lowered to this deployment's: {', '.join(lowered)}.")


def workroot() -> Path:
    """Where candidates' code is copied to run (the evidence pass's runs, a grader's code tools):
    a folder the sandbox's user enters."""
    folder = _data() / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    return folder


def _data() -> Path:
    """The evidence's folder in the data folder: the codebases' cache and the runs."""
    return Path(settings.DATA_DIR) / "evidence"


def _gather(group_id: int, mine) -> dict:
    """The evidence of one group: the fields its row gets. Raises NoCodebase when there is none."""
    rows = list(Trajectory.objects.filter(group_id=group_id).order_by("trajectory_id")
                .values_list("trajectory_id", "patch", "passed", "tests"))
    code = group_code(group_id, trajectory_tests=[tests for *_, tests in rows])
    codebase, execution, sandbox = code.codebase, code.execution, code.sandbox
    budget = GroupBudget(existing_test_files=int(work.setting("evidence", "EXISTING_FILES")),
                         runs=int(work.setting("evidence", "RUNS")),
                         seconds=float(work.setting("evidence", "SECONDS")))
    reference_patch, statement = Group.objects.values_list("reference_patch", "statement").get(pk=group_id)
    targets = traced_in(reference_patch, codebase.path)
    plan = plan_runs([Candidate(tid, patch, passed) for tid, patch, passed, _ in rows],
                     codebase_id=codebase.id, codebase_files=codebase.files, environment=execution.environment,
                     reward_tests=execution.reward_tests, test_patch=execution.test_patch,
                     reference_patch=reference_patch, targets=targets,
                     calling_tests=calling_tests(targets, codebase.path, codebase.files,
                                                 skip=runnable_test_files(execution.test_patch)),
                     examples=statement_examples(statement), budget=budget)
    keys = {run.key for run in plan.runs}
    outcomes = {key: RunOutcome.from_dict(outcome)
                for key, outcome in EvidenceRun.objects.filter(key__in=keys).values_list("key", "outcome")}
    probes = {key: Probe.from_dict(probe) for key, probe in EvidenceProbe.objects.filter(
        key__in=[planned.key for planned in plan.probes]).values_list("key", "probe")}

    def stored(key: str) -> RunOutcome | None:
        found = EvidenceRun.objects.filter(key=key).values_list("outcome", flat=True).first()
        return None if found is None else RunOutcome.from_dict(found)

    def keep(run, outcome: RunOutcome) -> None:
        with transaction.atomic():
            row, created = EvidenceRun.objects.get_or_create(key=run.key, defaults={"outcome": outcome.to_dict()})
            spent = outcome.duration if created else 0.0
            if not mine.update(spent_s=F("spent_s") + spent):
                raise ClaimLost
        # A key run on two hosts at once (each its own work root) is stored once: every group
        # reads that outcome, this one too.
        outcomes[run.key] = outcome if created else RunOutcome.from_dict(row.outcome)

    def stored_probe(key: str) -> Probe | None:
        found = EvidenceProbe.objects.filter(key=key).values_list("probe", flat=True).first()
        return None if found is None else Probe.from_dict(found)

    def keep_probe(planned, probe: Probe) -> None:
        with transaction.atomic():
            row, created = EvidenceProbe.objects.get_or_create(key=planned.key, defaults={"probe": probe.to_dict()})
            if not mine.update(spent_s=F("spent_s") + (probe.duration if created else 0.0)):
                raise ClaimLost
        probes[planned.key] = probe if created else Probe.from_dict(row.probe)

    spent = GroupEvidence.objects.values_list("spent_s", flat=True).get(pk=group_id)
    skipped = run_planned(plan, codebase=codebase.path, sandbox=sandbox, workroot=workroot(),
                          environment=execution.environment, on_result=keep, stored=stored,
                          on_probe=keep_probe, stored_probe=stored_probe,
                          seconds=max(budget.seconds - spent, 0.0), done=set(outcomes) | set(probes))
    matrix = Matrix.build(plan, outcomes, tuple(skipped), probes)
    broken = breaks_tests(matrix)
    return {"status": DONE, "reason": "", "error": "", "codebase": codebase.id[:700], "matrix": matrix.to_dict(),
            "breaks": {tid: [list(cell) for cell in cells] for tid, cells in broken.items()},
            "flaky": flaky(matrix), "breaks_tests": bool(broken), "lowered": code.lowered}


def _sandbox(environment: Environment) -> Sandbox:
    """The sandbox for `environment`; NoCodebase when its interpreter lies where the sandbox
    shows nothing (the deployment lists such folders in GAGAR_SANDBOX_PATHS)."""
    config = sandbox_config(environment)
    if config.backend == "bwrap" and environment.python:
        python = Path(environment.python)
        if not any(python.is_relative_to(folder) for folder in config.readonly_paths):
            raise NoCodebase(f"environment.python {environment.python} is not in a folder the sandbox shows "
                             f"({', '.join(config.readonly_paths)}: GAGAR_SANDBOX_PATHS adds folders)")
    return make_sandbox(config)
