"""What the API reads and answers, as ninja schemas: the OpenAPI document is made from these."""

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, get_type_hints

from ninja import Schema
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Json, create_model

from grading.formats import FORMATS
from webapp.advantages.config import AdvantageConfig
from webapp.batches.services import BATCH_NAME_MAX_CHARS, batch_name_problem
from webapp.exports.formats import ADVANTAGES, formats_of
from webapp.exports.formats import FORMATS as EXPORT_FORMATS
from webapp.models import Export

# How long a request may block waiting for grading or an export; a trainer asks again after.
MAX_WAIT_S = 120.0

Finite = Annotated[float, Field(allow_inf_nan=False)]
Wait = Annotated[float, Field(ge=0, le=MAX_WAIT_S, allow_inf_nan=False,
                              description=f"seconds to block until grading is done (at most {MAX_WAIT_S:g})")]
# A name as it may appear in a file name of an import (the batch keeps the names of its files).
FileName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
# A run's name becomes part of a batch name: no control characters, not blank at the start.
RunName = Annotated[str, Field(min_length=1, max_length=150, pattern=r"^[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$")]
ProfileName = Annotated[str, Field(min_length=1, max_length=200)]
FormatName = Literal[tuple(FORMATS)]


def _batch_name(name: str) -> str:
    problem = batch_name_problem(name.strip())
    if problem:
        raise ValueError(problem)
    return name


# The import's own rule (the same answer on SQLite and PostgreSQL), also for a lookup by name.
BatchName = Annotated[str, Field(min_length=1, max_length=BATCH_NAME_MAX_CHARS), AfterValidator(_batch_name)]


class ErrorOut(Schema):
    errors: list[str] = Field(description="each problem as a sentence; for rollouts `file:line: field: reason`")


# --- batches -------------------------------------------------------------------------


class BatchQuery(Schema):
    name: BatchName | None = None


class BatchOut(Schema):
    id: int
    name: str
    created_at: datetime
    pass_threshold: float
    n_groups: int
    n_trajectories: int
    n_passed: int


class UploadQuery(Schema):
    name: BatchName = Field(description="the batch: created, or with `append` extended")
    append: bool = Field(False, description="add to the batch if it exists (identical rollouts are skipped); "
                                            "without it an existing name is an error (400)")
    pass_threshold: Finite | None = Field(
        None, description="reward at or above which a line without `passed` passes (default: the app's)")
    filename: FileName = Field("upload.jsonl", description="the name errors and the batch's sources give it")
    format: FormatName = Field("jsonl", description="the body's format (docs/rollout-format.md); formats "
                                                    "that need evaluation reports go to POST /batches/import")


class ImportFilesQuery(Schema):
    name: BatchName = Field(description="the batch: created, or with `append` extended")
    append: bool = Field(False, description="add to the batch if it exists (identical rollouts are skipped)")
    pass_threshold: Finite | None = Field(
        None, description="reward at or above which a trajectory passes (default: the app's)")
    format: FormatName = Field(description="the files' format (docs/rollout-format.md)")


class SkippedOut(Schema):
    count: int
    first: list[str] = Field(description="the first few items skipped for this reason, as run/instance")


class ImportOut(Schema):
    batch: BatchOut
    created: bool
    new_groups: int
    new_trajectories: int
    unchanged_trajectories: int
    skipped: dict[str, SkippedOut] = Field(description="what the format's adapter left out, by reason")
    notes: list[str] = Field(description="how the adapter read the files (e.g. how verl samples were grouped)")

    @staticmethod
    def resolve_skipped(result) -> dict:
        return result.notes.skipped_by_reason()

    @staticmethod
    def resolve_notes(result) -> list[str]:
        return list(result.notes.notes)


class RunOut(Schema):
    id: int
    grader: str
    grader_version: str
    created_at: datetime
    state: Literal["running", "cancelling", "cancelled", "done", "failed", "partial"]
    cancelled_at: datetime | None
    cancelled_by: str | None = Field(description="who cancelled the run; null when not cancelled or unknown")
    counts: dict[str, int]
    failures: list[dict[str, Any]]


class StatusOut(Schema):
    batch: BatchOut
    labels: dict[str, int] = Field(description="groups per label (mixed, all_pass, all_fail, singleton)")
    mixed: int
    graded: int = Field(description="mixed groups with a finished grading")
    gradings: dict[str, int] = Field(
        description="gradings of the batch per state: queued, running, done, failed, cancelled")
    grading_active: bool
    runs: list[RunOut] = Field(description="the latest grading runs, newest first")


class LaunchIn(Schema):
    grader: ProfileName = "heuristic"
    regrade: bool = False


class LaunchOut(Schema):
    run: int | None = Field(description="the new grading run; null when every mixed group was graded or in progress")
    queued: int
    skipped: int
    active_run: int | None = Field(description="the run still grading skipped groups, if any")
    broker_error: str = Field(description="why the gradings are not sent yet (the broker is down; they are sent "
                                          "as soon as it is back), or empty")


# The export formats' names as the registry has them (webapp/exports/formats.py).
AdvantagesFormat = Literal[tuple(fmt.name for fmt in formats_of(ADVANTAGES))]
ExportFormatName = Literal[tuple(dict.fromkeys(name for _, name in EXPORT_FORMATS))]


class AdvantagesQuery(Schema):
    format: AdvantagesFormat = "jsonl"
    wait: Wait = 0


# --- exports -------------------------------------------------------------------------


class ExportIn(Schema):
    kind: Literal[tuple(Export.Kind.values)] = "advantages"
    format: ExportFormatName = "parquet"
    config: dict[str, Any] = Field(default_factory=dict, description="advantage config or SFT options")
    allow_ungraded: bool = Field(False, description="export advantages while grading of the batch is queued or "
                                                    "running; the manifest counts the groups left ungraded")


class ExportFileOut(Schema):
    name: str
    bytes: int
    sha256: str


class ExportOut(Schema):
    id: int
    batch: str
    kind: str
    format: str
    status: str
    config: dict[str, Any]
    rows_done: int
    rows_total: int
    error: str
    files: list[ExportFileOut]
    created_at: datetime
    finished_at: datetime | None

    @staticmethod
    def resolve_batch(export) -> str:
        return export.batch.name


class WaitQuery(Schema):
    wait: Wait = 0


# --- online steps --------------------------------------------------------------------


# The JSON type of each type a field of AdvantageConfig has: a field of another type fails at import.
CONFIG_JSON_TYPES = {str: str, bool: bool, float | None: Finite, Mapping[str, Any]: dict[str, Any],
                     tuple[str, ...]: list[str]}
# AdvantageConfig's fields, each optional: what a step leaves out stays as the default config has it.
AdvantageOverrides = create_model(
    "AdvantageOverrides",
    __doc__="Fields of an advantage config (webapp.advantages.config.AdvantageConfig) to change; the rest stay.",
    __config__=ConfigDict(extra="forbid"),
    **{name: (CONFIG_JSON_TYPES[kind] | None, None) for name, kind in get_type_hints(AdvantageConfig).items()},
)


class StepQuery(Schema):
    run: RunName = Field(description="the training run (created on first use)")
    step: Annotated[int, Field(ge=0, le=10**12)] = Field(
        description="the step's number: after the run's latest, unless `append`")
    append: bool = Field(False, description="add to the run's step if it has it, or add a step below its latest; "
                                            "without it a step the run has (unless sent again unchanged, a "
                                            "retry) or has passed is refused (409)")
    grader: ProfileName = "heuristic"
    pass_threshold: Finite | None = None
    config: Json[AdvantageOverrides] | None = Field(
        None, description="advantage config overrides as a JSON object, over the app's default config")


class StepSubmitOut(Schema):
    run: str
    run_id: int
    step: int
    batch: str
    batch_id: int
    new_trajectories: int
    groups: int
    mixed: int
    queued: int = Field(description="gradings queued by this call; 0 when the step was already submitted")


# The step answers are plain pydantic models: they are made from dicts, and ninja's Schema,
# which can read ORM objects too, takes ten times as long over a step's thousand rows.


class GroupStateOut(BaseModel):
    group_id: str
    label: str
    state: Literal["graded", "pending", "failed", "cancelled", "not_mixed"]
    reason: str


class TrajectoryRewardOut(BaseModel):
    group_id: str
    trajectory_id: str
    reward: float
    corrected_reward: float | None = Field(
        description="the reward after a human overrode the test verdict (1.0 passing, 0.0 not); null where "
                    "nobody did. `passed` and the advantages follow it")
    passed: bool
    grpo_advantage: float
    advantage: float
    reward_for_trainer: float
    source: str


class StepOut(BaseModel):
    batch: str
    batch_id: int
    complete: bool = Field(description="no mixed group is still waiting for its grading")
    config: dict[str, Any]
    groups: list[GroupStateOut]
    trajectories: list[TrajectoryRewardOut]


# --- training runs -------------------------------------------------------------------


class RunQuery(Schema):
    name: RunName | None = None


class TrainingRunOut(Schema):
    id: int
    name: str
    created_at: datetime
    steps: int
    latest_step: int | None
    groups: int
    trajectories: int
    state: Literal["grading", "updating", "ready"] = Field(
        description="grading while a step's grading is queued or running, updating while a step's figures are due")


class RunStepOut(Schema):
    step: int
    batch: str
    batch_id: int
    trajectories: int
    updating: bool = Field(description="its figures are being computed again: `measures` are the previous ones")
    pruned: bool = Field(description="its transcripts, rendered patches and search entries were removed")
    trainer_wait_s: float | None = Field(description="an online step: seconds from its submission to the trainer's "
                                                     "last read of its rewards")
    measures: dict[str, Any] | None = Field(description="the step's stored figures (docs/runs.md); null until first "
                                                        "computed, and in the run's list of steps")


class TrainingRunDetailOut(TrainingRunOut):
    step_list: list[RunStepOut] = Field(description="every step, in order, without its figures")


class RunFiguresOut(Schema):
    run: str
    steps: list[RunStepOut]


class RunExportQuery(Schema):
    allow_ungraded: bool = Field(False, description="export while a step's grading is queued or running (the "
                                                    "manifest counts the groups left ungraded)")
