"""Processing gradings, in a worker: claim, grade, write the results.

A task hands `gradings_process` the primary keys of a chunk of gradings. Each
is claimed by one conditional UPDATE (queued -> running, attempts + 1, a fresh
claim token, a lease) and its result written by another that matches that
token, so a second delivery of the same message claims nothing and a worker
whose grading was swept meanwhile writes nothing. While it grades, a thread of
the worker process renews the lease every GAGAR_GRADING_HEARTBEAT seconds: a
killed worker's gradings are re-queued by the sweep once the lease runs out,
while a grading that takes an hour keeps its lease as long as its process lives.
A transient GraderError ends the attempt as a lost worker does (`work.attempt_lost`:
queued again, sent here with a backoff, until its attempts run out, unless its run
was cancelled meanwhile); a permanent one fails it with its message. A grading
whose group's execution evidence is being gathered is not claimed: it waits for
that pass (`GRADINGS.waits`, webapp/work.py), whose task sends it. Whatever else breaks while
a run's groups are loaded, graded or written (a MemoryError included) fails that
run's gradings with the reason, and the chunk's other runs go on. A grader that runs the
candidates' code (`uses_code`) is given it for each group whose execution evidence was gathered:
the same codebase, environment and sandbox as that pass (webapp/evidence), each candidate's
tree made in a scratch folder of the evidence's work root and removed once the run's groups
are graded; its runs end by half the task's soft time limit.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime

from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from grading.cases import Grade, GraderError, GroupCase
from grading.code_access import CodeAccess
from grading.execution import NoCodebase
from grading.graders.base import Grader
from grading.profiles import Profile, build_grader
from grading.rankings import InvalidRanking, validate_ranking
from grading.sandbox import SandboxConfigError
from webapp import derived, work
from webapp.cases import cases_from_rows
from webapp.evidence.services import group_code, workroot
from webapp.grading import sql
from webapp.grading.services import GRADINGS
from webapp.models import Grading, GradingRun, GradingTranscript
from webapp.triage import triage_refresh

log = logging.getLogger(__name__)

RUNNING, DONE, FAILED = Grading.Status.RUNNING, Grading.Status.DONE, Grading.Status.FAILED
RETRY_BACKOFF_S = 5
RETRY_BACKOFF_MAX_S = 300
ERROR_CHARS = 4000
CODE_SHARE_OF_TASK = 0.5


@dataclass
class Processed:
    """What one call of `gradings_process` did, by grading id."""

    claimed: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    retrying: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)  # would have been retried, but the run was cancelled
    lost: list[int] = field(default_factory=list)  # the claim moved on before the result was written


@functools.lru_cache(maxsize=8)
def _grader(name: str, config_json: str) -> Grader:
    """Graders are loaded once per worker process: an LLM backend loads a model."""
    return build_grader(Profile(**json.loads(config_json)))


@dataclass
class _Claim:
    """A grading this worker holds: what processing it needs, without model instances."""

    pk: int
    run: GradingRun
    group: GroupCase  # without trajectories: group_id, statement, repo
    group_pk: int
    attempts: int
    claimed_at: datetime


def gradings_process(*, grading_ids: Sequence[int]) -> Processed:
    """Claim the queued ones among `grading_ids`, grade them, write the results."""
    token = work.new_token()
    result = Processed()
    # Candidates' code runs stop at half the task's soft time limit: the models' own turns and
    # the writes have the rest, and a chunk of groups whose graders spend every code budget
    # ends with their grades, not at the limit with none.
    code_deadline = time.monotonic() + CODE_SHARE_OF_TASK * work.setting("grading", "SOFT_TIME_LIMIT")
    by_run: dict[int, list[_Claim]] = defaultdict(list)
    for claim in _claim(grading_ids, token):
        by_run[claim.run.pk].append(claim)
        result.claimed.append(claim.pk)
    if not by_run:
        return result
    with work.lease_renewed(GRADINGS, lambda: Grading.objects.filter(status=RUNNING, claim_token=token),
                       f"lease-{token[:8]}"):
        for claims in by_run.values():
            try:
                _process_run(claims, token, result, code_deadline)
            except (OperationalError, InterfaceError, SoftTimeLimitExceeded):
                raise  # weather, or the task's time: the lease runs out and the sweep queues them again
            except Exception as error:  # MemoryError included: loading or writing this run's groups broke
                failed = _unexpected(error)
                _write(claims, [None] * len(claims), [failed] * len(claims), token, result)
    return result


def _claim(grading_ids: Sequence[int], token: str) -> list[_Claim]:
    """Claim the queued ones among `grading_ids` under `token` in one conditional UPDATE, but
    those that wait for their group's evidence (`work.claim`), and read what grading them
    needs: their groups and their runs."""
    now = timezone.now()
    with transaction.atomic():
        sql.relax_commit()
        claimed = work.claim(GRADINGS, grading_ids, token, now, finished_at=None)
        if not claimed:
            return []
        # The token is new: the rows that carry it are the ones just claimed.
        rows = sql.claimed_gradings(RUNNING, token)
        runs = sql.claimed_runs(RUNNING, token)
    return [_Claim(pk=pk, run=runs[run_pk], group_pk=group_pk, attempts=attempts,
                   claimed_at=now, group=GroupCase(group_id=group_id, statement=statement, repo=repo,
                                                   trajectories=()))
            for pk, run_pk, attempts, group_pk, group_id, statement, repo in rows]


def _process_run(claims: list[_Claim], token: str, result: Processed, code_deadline: float) -> None:
    run = claims[0].run
    try:
        grader = _grader(run.grader, json.dumps(run.config, sort_keys=True))
    except Exception as error:  # a grader that cannot load fails every group alike
        if not isinstance(error, GraderError):
            error = _unexpected(error)
        _write(claims, [None] * len(claims), [error] * len(claims), token, result)
        return
    cases = _cases(claims, token, messages=grader.uses_messages, tests=grader.uses_tests)
    with ExitStack() as code_trees:  # the candidates' trees go once the results are written
        if grader.uses_code:
            cases = _with_code(claims, cases, code_trees, code_deadline)
        try:
            outcomes = _rank(grader, cases)
        except SoftTimeLimitExceeded:
            outcomes = [GraderError("the task ran past its soft time limit", permanent=False)] * len(claims)
        _write(claims, cases, outcomes, token, result)


def _with_code(claims: list[_Claim], cases: list[GroupCase], code_trees: ExitStack,
               deadline: float) -> list[GroupCase]:
    """`cases` with their candidates' code where the group's execution evidence was gathered;
    `code_trees` removes the candidates' trees when it closes. A group whose code cannot be had
    now (the store changed since its pass) is graded without, its code tools saying why."""
    given = []
    for claim, case in zip(claims, cases, strict=True):
        if case.execution is None:
            given.append(case)
            continue
        try:
            code = group_code(claim.group_pk)
        except (NoCodebase, SandboxConfigError) as error:
            given.append(replace(case, no_code=f"its code cannot be had now: {error}"))
            continue
        access = CodeAccess(code.codebase.path, code.execution.environment, code.sandbox, workroot(), deadline,
                            code.reference_patch)
        given.append(replace(case, code=code_trees.enter_context(access)))
    return given


def _rank(grader: Grader, cases: list[GroupCase]) -> list[Grade | GraderError]:
    """`rank_many`; if it breaks on something other than a GraderError, grade one by one so
    the group that breaks fails alone."""
    try:
        return grader.rank_many(cases)
    except SoftTimeLimitExceeded:
        raise
    except Exception as error:
        if len(cases) == 1:
            return [_unexpected(error)]
    outcomes: list[Grade | GraderError] = []
    for case in cases:
        try:
            outcomes.extend(grader.rank_many([case]))
        except SoftTimeLimitExceeded:
            raise
        except Exception as error:
            outcomes.append(_unexpected(error))
    return outcomes


def _unexpected(error: Exception) -> GraderError:
    """A bug, not weather: retrying will not help."""
    log.exception("grader raised %s", type(error).__name__)
    return GraderError(f"{type(error).__name__}: {error}", permanent=True)


def _cases(claims: list[_Claim], token: str, *, messages: bool, tests: bool) -> list[GroupCase]:
    """The groups of `claims` (all of one run, claimed under `token`) with their trajectories;
    transcripts and test evidence only for a grader that reads them."""
    rows = sql.claimed_trajectories(RUNNING, token, claims[0].run.pk, tests=tests)
    groups = [(c.group_pk, c.group.group_id, c.group.statement, c.group.repo) for c in claims]
    decoded = ((*row[:6], *(None if v is None else json.loads(v) for v in row[6:])) for row in rows)  # JSON as text
    by_pk = cases_from_rows(groups, decoded, messages=messages)
    return [by_pk[c.group_pk] for c in claims]


def _write(claims: list[_Claim], cases: list, outcomes: list, token: str, result: Processed) -> None:
    """Write every outcome under the claim `token`, in one transaction: results in one
    conditional UPDATE (only rows still running under this claim), failures row by row."""
    now = timezone.now()
    done, failed, retry = [], [], []
    for claim, case, outcome in zip(claims, cases, outcomes, strict=True):
        if isinstance(outcome, Grade):
            outcome = _checked(case, outcome)
        if isinstance(outcome, Grade):
            done.append((claim, outcome))
        elif outcome.permanent:
            failed.append((claim, outcome))
        else:
            retry.append((claim, outcome))
    mine = Grading.objects.filter(status=RUNNING, claim_token=token)
    with transaction.atomic():
        sql.relax_commit()
        written = sql.write_results([_result_fields(claim, grade, now) for claim, grade in done], status=DONE,
                                    finished_at=now, claimed_status=RUNNING, token=token)
        for claim, grade in done:
            (result.done if claim.pk in written else result.lost).append(claim.pk)
            if claim.pk in written:
                _keep_transcript(claim, grade)
        triage_refresh([claim.group_pk for claim, _ in done if claim.pk in written])
        run = claims[0].run
        if written and not run.grader_version:
            GradingRun.objects.filter(pk=run.pk, grader_version="").update(grader_version=done[0][1].version)
        for claim, error in retry:
            ended = work.attempt_lost(GRADINGS, claim.pk, token, f"failed: {_message(error)}", now,
                                      spent=_spent(claim, error, now))
            if ended == work.QUEUED:
                work.send_claimed_after_commit(GRADINGS, [(claim.pk, run.queue)],
                                               countdown=_backoff(claim.attempts))
            elif ended == work.FAILED:
                _keep_transcript(claim, error)
            {work.QUEUED: result.retrying, work.FAILED: result.failed, work.CANCELLED: result.cancelled,
             "": result.lost}[ended].append(claim.pk)
        for claim, error in failed:
            wrote = mine.filter(pk=claim.pk).update(status=FAILED, error=_message(error), finished_at=now,
                                                    **_spent(claim, error, now))
            (result.failed if wrote else result.lost).append(claim.pk)
            if wrote:
                _keep_transcript(claim, error)
        if version := run.grader_version or (done[0][1].version if done else ""):  # its audit dashboard figures
            derived.figures_stale(run.batch_id, ("correctness", "agreement", "gradings", "drift"), version)
        derived.batch_figures_stale(run.batch_id)  # its run's step figures and its grading panel


def _spent(claim: _Claim, error: GraderError, now: datetime) -> dict:
    """What a failed attempt cost, by Grading field name."""
    usage = _usage(error.usage)
    return {"usage": usage, "tokens": _tokens(usage), "duration_s": (now - claim.claimed_at).total_seconds()}


def _keep_transcript(claim: _Claim, outcome) -> None:
    transcript = outcome.transcript
    if transcript:
        GradingTranscript.objects.update_or_create(grading_id=claim.pk, defaults={"messages": list(transcript)})


def _message(error: Exception) -> str:
    return str(error)[:ERROR_CHARS] or type(error).__name__


def _checked(case: GroupCase, grade: Grade) -> Grade | GraderError:
    try:
        validate_ranking(grade.tiers, [t.trajectory_id for t in case.passing], grade.flags)
    except InvalidRanking as error:
        return GraderError(f"invalid ranking from {grade.grader}: {error}", permanent=True)
    return grade


def _result_fields(claim: _Claim, grade: Grade, now) -> dict:
    """What a done grading's row gets, by Grading field name, JSON-ready; `pk` names the row."""
    usage = _usage(grade.usage)
    return {
        "pk": claim.pk,
        "duration_s": grade.latency_s or (now - claim.claimed_at).total_seconds(),
        "grader_version": grade.version,
        "tiers": [list(tier) for tier in grade.tiers],
        "rationales": dict(grade.rationales),
        "flags": {tid: list(names) for tid, names in dict(grade.flags).items()},
        "scores": None if grade.scores is None else {k: float(v) for k, v in dict(grade.scores).items()},
        "confidence": grade.confidence,
        "usage": usage,
        "tokens": _tokens(usage),
    }


def _usage(usage) -> dict:
    return {k: v for k, v in dict(usage or {}).items() if isinstance(v, int | float)}


def _tokens(usage: dict) -> int:
    if not usage:  # a grader without a model
        return 0
    if "total_tokens" in usage:
        return int(usage["total_tokens"])
    keys = ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
    return int(sum(usage.get(k, 0) or 0 for k in keys))


def _backoff(attempts: int) -> float:
    base = min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S * 2 ** max(attempts - 1, 0))
    return base * random.uniform(0.5, 1.0)
