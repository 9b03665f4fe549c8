"""Writes of the API: tokens, imports of uploaded rollouts, grading launches and online steps."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from grading.profiles import ProfileError, load_profiles
from grading.rollouts import RolloutFormatError
from webapp import derived
from webapp.advantages.config import DEFAULT_CONFIG, parse_advantage_config
from webapp.advantages.services import advantage_config_update
from webapp.api.selectors import token_digest
from webapp.batches.services import ImportResult, batch_import
from webapp.batches.uploads import ImportFailed, batch_import_uploaded
from webapp.grading.services import Launch, LaunchError, grading_launch
from webapp.models import ApiToken, Batch, Group, Run
from webapp.runs.services import step_import

TOKEN_PREFIX = "gagar_"
PREFIX_CHARS = len(TOKEN_PREFIX) + 6  # what a list shows of a token: enough to tell tokens apart
# last_used_at is written at most this often per token: not one write per request.
TOUCH_EVERY = timedelta(minutes=1)


class InputError(ValueError):
    """A request the app cannot act on; `errors` says why, one sentence each."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`; returns the row and the token itself, which is not stored."""
    value = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=value[:PREFIX_CHARS], digest=token_digest(value))
    return token, value


def api_token_revoke(*, user, pk: int) -> ApiToken:
    """Revoke one of `user`'s tokens (ApiToken.DoesNotExist for anyone else's)."""
    token = ApiToken.objects.get(pk=pk, user=user)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def api_token_touch(token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


def rollouts_import(*, path: Path, batch_name: str, user, pass_threshold: float | None,
                    append: bool, file_format: str = "jsonl") -> ImportResult:
    """Import one received file in `file_format` into `batch_name` (an existing one only with
    `append`), whole or not at all; InputError lists every bad line as `file:line: field: reason`,
    named by the file's name, not where it was kept."""
    threshold = settings.GAGAR_PASS_THRESHOLD if pass_threshold is None else pass_threshold
    try:
        return batch_import(paths=[path], batch_name=batch_name, user=user, pass_threshold=threshold,
                            append=append, file_format=file_format)
    except RolloutFormatError as error:
        lines = error.errors.summary().splitlines()
        raise InputError([line.replace(str(path), path.name) for line in lines]) from None


def files_import(*, uploads: dict[str, list], file_format: str, batch_name: str, user,
                 pass_threshold: float | None, append: bool) -> ImportResult:
    """Import uploaded files by role (`paths`, `reports`, `tasks`) as the batches page's form
    does; InputError with every problem."""
    try:
        return batch_import_uploaded(uploads=uploads, file_format=file_format, batch_name=batch_name, user=user,
                                     append=append, pass_threshold=pass_threshold)
    except ImportFailed as failure:
        raise InputError(failure.errors) from None


def grading_start(*, batch: Batch, grader: str, user, regrade: bool = False) -> Launch:
    """Launch grading of `batch` with a grader profile (a web user picks from the same list)."""
    try:
        profiles = load_profiles()
    except ProfileError as error:
        raise InputError([f"grader profiles: {error}"]) from None
    if grader not in profiles:
        raise InputError([f"grader: unknown profile {grader!r} (profiles: {', '.join(sorted(profiles))})"])
    try:
        return grading_launch(batch=batch, grader=grader, user=user, regrade=regrade)
    except LaunchError as error:
        raise InputError([f"grader: {error}"]) from None


@dataclass(frozen=True)
class StepSubmission:
    batch: Batch
    run: Run
    new_trajectories: int
    groups: int
    mixed: int
    queued: int


def step_submit(*, path: Path, run: str, step: int, grader: str, config: dict | None, user,
                pass_threshold: float | None, append: bool = False) -> StepSubmission:
    """One training step's rollouts become step `step` of the run `run` (created on first
    use), the batch `<run>/step-<step>`, graded by `grader` under the default advantage config
    with `config`'s overrides.

    A second submission of the same content is a no-op (a client's retry): its rollouts are
    already there and its mixed groups already queued, running or graded by that grader.
    Other content for an existing step, or a step below the run's latest, is refused
    (StepRefused, naming the step) unless `append`. Import, config and launch happen in one
    transaction, so a step that cannot be launched leaves nothing."""
    try:
        advantages = parse_advantage_config(config or {}, base=DEFAULT_CONFIG)
    except ValueError as error:
        raise InputError([f"config: {error}"]) from None
    with transaction.atomic(), derived.derived_data_last():  # the trainer waits for the gradings, not the renders
        imported = step_import(
            run_name=run, number=step, append=append, retry_ok=True, user=user,
            import_batch=lambda name, extend: rollouts_import(path=path, batch_name=name, user=user,
                                                             pass_threshold=pass_threshold, append=extend))
        batch = imported.result.batch
        if batch.advantage_config != advantages.as_dict():
            advantage_config_update(batch=batch, config=advantages)
        launch = grading_start(batch=batch, grader=grader, user=user)
    return StepSubmission(
        batch=batch, run=imported.run, new_trajectories=imported.result.new_trajectories, groups=batch.n_groups,
        mixed=Group.objects.filter(batch=batch, label=Group.Label.MIXED).count(), queued=launch.queued,
    )
