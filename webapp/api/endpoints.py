"""The trainer API: batches, grading, advantages, exports, online steps and training runs,
documented at /api/docs.

Every operation checks the caller's role first (`auth.require`), then parses, calls one
service or selector and answers. Every error is `{"errors": [...]}` with the status that
says what kind: 400 bad input, 401 no or bad token, 403 a role missing, 404, 409 a step
that collides with one its run has, 411/413/415
an upload that cannot be taken, 422 a parameter of the wrong shape, 429 too many refused
tokens; and for what the app did not expect, logged with its traceback: 503 the database
unavailable, 507 no room on disk, 500 anything else. Never an HTML page.
"""

import errno
import logging
import shutil
from functools import wraps

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import FileResponse, Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from ninja import File, NinjaAPI, Query, Status, UploadedFile
from ninja.decorators import decorate_view
from ninja.errors import HttpError, ValidationError

from grading.formats import FORMATS
from webapp.advantages.config import parse_advantage_config
from webapp.api import schemas, selectors, services
from webapp.api.auth import EXPORTER, GRADER, READER, TokenAuth, require
from webapp.api.uploads import received_body, scratch_folder
from webapp.batches.uploads import UploadTooLarge, limit_upload
from webapp.exports import services as exports
from webapp.exports.advantages import advantage_jsonl_lines, write_advantages
from webapp.exports.formats import ADVANTAGES, export_format, formats_of
from webapp.exports.selectors import export_file as export_file_path
from webapp.models import Batch, Export, Run, RunStep
from webapp.rankings import RankingsHidden, Viewer
from webapp.runs import selectors as runs
from webapp.runs.services import StepRefused, step_answered

logger = logging.getLogger(__name__)
# Seconds a client is told to wait before it retries a call the database could not serve.
DATABASE_RETRY_AFTER_S = 5
# A write the disk refused for want of room: full, over quota, past the file size limit.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class Api(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        """The view's name (`batch_upload`), which is also what a client generator names its call."""
        return operation.view_func.__name__

    def validation_error_from_error_contexts(self, error_contexts) -> ValidationError:
        """Each bad field by where it was sent and its path there (`body.grader`,
        `query.config.params`), not through the view's argument that holds it (`body.payload.grader`)."""
        errors = []
        for context in error_contexts:
            model = context.model
            for error in context.pydantic_validation_error.errors(include_url=False):
                loc = error["loc"]
                if loc in model.__ninja_flatten_map_reverse__:
                    loc = model.__ninja_flatten_map_reverse__[loc]
                elif len(loc) > 1 and loc[0] in model.model_fields:
                    loc = loc[1:]
                errors.append({"loc": (model.__ninja_param_source__, *loc), "msg": error["msg"]})
        return ValidationError(errors)


api = Api(
    title="GAGAR Studio API",
    version="1",
    description="Upload rollouts, grade them, fetch advantages and exports, grade one training step online. "
                "Authenticate with `Authorization: Bearer <token>` (make a token on the API tokens page).",
    auth=TokenAuth(),
    urls_namespace="api",
)

JSONL = "application/x-ndjson"
ERRORS = {status: schemas.ErrorOut for status in (400, 401, 403, 404, 422, 429, 500, 503)}
UPLOAD_ERRORS = {**ERRORS, **{status: schemas.ErrorOut for status in (411, 413, 415, 507)}}
ROLLOUTS_BODY = {"requestBody": {"required": True, "content": {
    JSONL: {"schema": {"type": "string", "format": "binary"}},
}, "description": "rollouts as JSON Lines (docs/rollout-format.md); `Content-Encoding: gzip` or `zstd` "
                  "when compressed. Streamed to disk; `Content-Length` is required."}}
ADVANTAGES_ANSWER = {"responses": {200: {"description": "the rows, in the file of the format asked for", "content": {
    fmt.content_type: {"schema": {"type": "string"} if fmt.content_type == JSONL else
                       {"type": "string", "format": "binary"}} for fmt in formats_of(ADVANTAGES)}}}}
FILE_ANSWER = {"responses": {200: {"description": "the file", "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}}


@api.exception_handler(HttpError)
def http_error(request, error: HttpError):
    response = api.create_response(request, {"errors": [error.message]}, status=error.status_code)
    if error.status_code == 401:
        response["WWW-Authenticate"] = "Bearer"
    if getattr(error, "retry_after", None) is not None:  # auth.TooManyAttempts
        response["Retry-After"] = str(error.retry_after)
    return response


@api.exception_handler(ValidationError)
def validation_error(request, error: ValidationError):
    messages = [f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in error.errors]
    return api.create_response(request, {"errors": messages}, status=422)


@api.exception_handler(Http404)
def not_found(request, error: Http404):
    return api.create_response(request, {"errors": [str(error) or "not found"]}, status=404)


@api.exception_handler(services.InputError)
def input_error(request, error: services.InputError):
    return api.create_response(request, {"errors": error.errors}, status=400)


@api.exception_handler(StepRefused)
def step_refused(request, error: StepRefused):
    status = 400 if str(error).startswith(("run:", "step:")) else 409
    return api.create_response(request, {"errors": [str(error)]}, status=status)


@api.exception_handler(RankingsHidden)
def rankings_hidden(request, error: RankingsHidden):
    return api.create_response(request, {"errors": [str(error)]}, status=403)


@api.exception_handler(Exception)
def unexpected_error(request, error: Exception):
    """What no other handler takes, in the same shape: a database that dropped the connection
    or is down (503, to retry), a disk with no room for a write (507), Django's refusals of a
    request (400, 403, 413), anything else (500). Logged with the traceback, the 4xx excepted."""
    status, message = _unexpected(error)
    if status >= 500:
        logger.error("API %s %s answered %d: %s: %s", request.method, request.path, status, type(error).__name__,
                     error, exc_info=error)
    response = api.create_response(request, {"errors": [message]}, status=status)
    if status == 503:
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    return response


def _unexpected(error: Exception) -> tuple[int, str]:
    """The status and the sentence for an exception no other handler takes; never a path or a
    query of the server in the sentence (the log has them)."""
    if isinstance(error, OperationalError) and _database_full(error):
        return 507, "the database has no room to write (its disk is full): retry once its administrator has made room"
    if isinstance(error, OperationalError | InterfaceError):
        return 503, f"the database is unavailable ({type(error).__name__}): retry in a few seconds"
    if isinstance(error, OSError) and error.errno in NO_ROOM:
        reason = error.strerror or errno.errorcode[error.errno]
        return 507, (f"the server has no room to write this call's data ({reason}): retry once its administrator "
                     "has made room")
    if isinstance(error, RequestDataTooBig):
        return 413, f"the request body is too large: {error}"
    if isinstance(error, PermissionDenied):
        return 403, str(error) or "permission denied"
    if isinstance(error, SuspiciousOperation):  # Django's refusals of a malformed request
        return 400, f"bad request: {error}"
    return 500, (f"the app failed on this call ({type(error).__name__}); the server's log has the details: "
                 "tell its administrator")


def _database_full(error: OperationalError) -> bool:
    """Whether the database refused a write for want of room: PostgreSQL's disk_full (53100),
    SQLite's SQLITE_FULL (its disk, or max_page_count)."""
    cause = error.__cause__
    return getattr(cause, "sqlstate", None) == "53100" or getattr(cause, "sqlite_errorcode", None) == 13


def _batch(batch_id: int) -> Batch:
    return get_object_or_404(Batch, pk=batch_id)


# --- batches -------------------------------------------------------------------------


@api.get("/batches", response={200: list[schemas.BatchOut], **ERRORS}, tags=["batches"])
def batches_list(request, query: Query[schemas.BatchQuery]):
    """The batches, newest first (at most 100); `name` finds one by its name."""
    require(request, READER)
    batches = Batch.objects.defer("sources", "advantage_config")
    if query.name is not None:
        batches = batches.filter(name=query.name)
    return batches[:100]


@api.post("/batches", response={200: schemas.ImportOut, 201: schemas.ImportOut, **UPLOAD_ERRORS},
          openapi_extra=ROLLOUTS_BODY, tags=["batches"])
def batch_upload(request, query: Query[schemas.UploadQuery]):
    """Import the body into the batch `name` (created if new: 201; an existing one only with
    `append=true`: 200), whole or not at all. Identical content already in the batch is skipped;
    every bad line is an error (400)."""
    require(request, GRADER)
    if FORMATS[query.format].needs_reports:
        raise HttpError(400, f"format: {query.format} needs an evaluation report per run: post the files "
                             "as a form to /api/batches/import")
    with received_body(request, filename=query.filename) as path:
        result = services.rollouts_import(path=path, batch_name=query.name, user=request.auth,
                                          pass_threshold=query.pass_threshold, append=query.append,
                                          file_format=query.format)
    return Status(201 if result.created else 200, result)


def _upload_limited(run):
    """An operation whose form over GAGAR_API_UPLOAD_LIMIT is refused (413) before it is read."""

    @wraps(run)
    def limited(request, *args, **kwargs):
        limit_upload(request)
        return run(request, *args, **kwargs)

    return limited


@api.exception_handler(UploadTooLarge)
def upload_too_large(request, error: UploadTooLarge):
    return api.create_response(request, {"errors": [str(error)]}, status=413)


@api.post("/batches/import", response={200: schemas.ImportOut, 201: schemas.ImportOut, **UPLOAD_ERRORS},
          tags=["batches"])
@decorate_view(_upload_limited)
def batch_import_files(request, query: Query[schemas.ImportFilesQuery], paths: File[list[UploadedFile]],
                       reports: File[list[UploadedFile]] = None, tasks: File[list[UploadedFile]] = None):
    """Import files posted as a form (`paths`; `reports`, one per run in the order of the runs;
    `tasks`) in `format` into the batch `name`, as POST /batches does a body. swe-agent and
    openhands runs come as archives (.zip, .tar, .tar.gz, .tgz) of run folders: the runs are
    their top-level folders, in the order of their names. The answer says what the format's
    adapter skipped and why; a form over the upload limit is refused (413) unread."""
    require(request, GRADER)
    result = services.files_import(uploads={"paths": paths, "reports": reports or [], "tasks": tasks or []},
                                   file_format=query.format, batch_name=query.name, user=request.auth,
                                   pass_threshold=query.pass_threshold, append=query.append)
    return Status(201 if result.created else 200, result)


@api.get("/batches/{batch_id}", response={200: schemas.StatusOut, **ERRORS}, tags=["batches"])
def batch_status(request, batch_id: int):
    """Groups by label, trajectories, and grading progress: gradings per state and the latest runs."""
    require(request, READER)
    return selectors.batch_status(_batch(batch_id), viewer=Viewer(request.user))


@api.post("/batches/{batch_id}/gradings", response={202: schemas.LaunchOut, **ERRORS}, tags=["grading"])
def grading_launch(request, batch_id: int, payload: schemas.LaunchIn):
    """Grade the batch's mixed groups with a grader profile; groups already graded or in
    progress by the same profile are skipped unless `regrade`."""
    require(request, GRADER)
    launch = services.grading_start(batch=_batch(batch_id), grader=payload.grader, user=request.auth,
                                    regrade=payload.regrade)
    return Status(202, {"run": launch.run.pk if launch.run else None, "queued": launch.queued,
                        "skipped": launch.skipped, "active_run": launch.active_run.pk if launch.active_run else None,
                        "broker_error": launch.broker_error})


# --- advantages and exports ------------------------------------------------------------


@api.get("/batches/{batch_id}/advantages", response={202: schemas.StatusOut, **ERRORS},
         openapi_extra=ADVANTAGES_ANSWER, tags=["advantages"])
def advantages(request, batch_id: int, query: Query[schemas.AdvantagesQuery]):
    """One row per trajectory (docs/exports.md) under the batch's advantage config, once no
    grading of the batch is queued or running; after `wait` seconds of grading, 202 and
    the batch's status instead, to ask again: never rows of a half-graded batch."""
    require(request, EXPORTER)
    batch = _batch(batch_id)
    if not selectors.wait_until(lambda: not selectors.grading_active(batch), seconds=query.wait):
        return Status(202, selectors.batch_status(batch, viewer=Viewer(request.user)))
    config = parse_advantage_config(batch.advantage_config)
    fmt = export_format(ADVANTAGES, query.format)
    filename = f"advantages-{batch.pk}.{fmt.extension}"
    if fmt.content_type == JSONL:  # rows stream as they are computed; other files are whole first
        response = StreamingHttpResponse(advantage_jsonl_lines(batch, viewer=Viewer(request.user), config=config),
                                         content_type=JSONL)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    folder = scratch_folder()
    try:
        path = folder / filename
        write_advantages(batch, path, viewer=Viewer(request.user), format=fmt.name, config=config)
        # Open, then remove: the open file stays readable until the response has sent it.
        data = path.open("rb")
    finally:
        shutil.rmtree(folder)
    return FileResponse(data, as_attachment=True, filename=filename, content_type=fmt.content_type)


@api.post("/batches/{batch_id}/exports", response={202: schemas.ExportOut, 409: schemas.ErrorOut, **ERRORS},
          tags=["exports"])
def export_launch(request, batch_id: int, payload: schemas.ExportIn):
    """Start an export built by a worker (or get the identical one already under way); its
    `config` overrides the batch's advantage config, or holds the SFT export's options. While
    grading of the batch runs, an advantages export is refused (409) unless `allow_ungraded`."""
    require(request, EXPORTER)
    try:
        export = exports.export_launch(batch=_batch(batch_id), kind=payload.kind, format=payload.format,
                                       config=payload.config, user=request.auth,
                                       allow_ungraded=payload.allow_ungraded)
    except exports.GradingUnfinished as error:
        return Status(409, {"errors": [str(error)]})
    except exports.ExportError as error:
        raise services.InputError([str(error)]) from None
    return Status(202, export)


@api.get("/exports/{export_id}", response={200: schemas.ExportOut, **ERRORS}, tags=["exports"])
def export_status(request, export_id: int, query: Query[schemas.WaitQuery]):
    """An export's state, progress and files, once it is done or failed or `wait` seconds have passed."""
    require(request, EXPORTER)
    export = get_object_or_404(Export, pk=export_id)
    selectors.wait_until(lambda: not selectors.export_active(export), seconds=query.wait)
    export.refresh_from_db()
    return export


@api.get("/exports/{export_id}/files/{name}", response=ERRORS, openapi_extra=FILE_ANSWER, tags=["exports"])
def export_file(request, export_id: int, name: str):
    """One file of a finished export, by the name its status lists."""
    require(request, EXPORTER)
    export = get_object_or_404(Export, pk=export_id)
    try:
        path = export_file_path(export, name)
    except LookupError as error:
        raise Http404(str(error)) from None
    return FileResponse(path.open("rb"), as_attachment=True, filename=name)


# --- online steps --------------------------------------------------------------------


@api.post("/steps", response={202: schemas.StepSubmitOut, 409: schemas.ErrorOut, **UPLOAD_ERRORS},
          openapi_extra=ROLLOUTS_BODY, tags=["steps"])
def step_submit(request, query: Query[schemas.StepQuery]):
    """Submit one training step's rollouts: they become step `step` of the run `run` (created
    on first use), the batch `<run>/step-<step>`, and its mixed groups are queued for grading.
    Sending the same step again unchanged changes nothing (a retry); other rollouts for a step
    the run has, or a step below its latest, are refused (409, naming the step) unless `append`."""
    require(request, GRADER)
    with received_body(request, filename=f"step-{query.step}.jsonl") as path:
        step = services.step_submit(path=path, run=query.run, step=query.step, grader=query.grader,
                                    config=query.config.model_dump(exclude_unset=True) if query.config else None,
                                    user=request.auth, pass_threshold=query.pass_threshold, append=query.append)
    return Status(202, {"run": step.run.name, "run_id": step.run.pk, "step": query.step, "batch": step.batch.name,
                        "batch_id": step.batch.pk, "new_trajectories": step.new_trajectories, "groups": step.groups,
                        "mixed": step.mixed, "queued": step.queued})


@api.get("/steps/{batch_id}", response={200: schemas.StepOut, **ERRORS}, tags=["steps"])
def step_rewards(request, batch_id: int, query: Query[schemas.WaitQuery]):
    """Each trajectory's `reward_for_trainer` and each group's state, once no mixed group is
    waiting for its grading or `wait` seconds have passed (then `complete` is false)."""
    require(request, GRADER)
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None:
        raise Http404(f"no step with batch id {batch_id}: it was never submitted, or its batch was deleted")
    selectors.wait_until(lambda: not selectors.grading_active(batch), seconds=query.wait)
    answer = selectors.step_result(batch, viewer=Viewer(request.user))
    step_answered(batch)
    return answer


# --- training runs -------------------------------------------------------------------


def _run(run_id: int) -> Run:
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404(f"no run with id {run_id}")
    return run


def _run_out(summary: runs.RunSummary) -> dict:
    return {"id": summary.run.pk, "name": summary.run.name, "created_at": summary.run.created_at,
            "steps": summary.steps, "latest_step": summary.latest, "groups": summary.groups,
            "trajectories": summary.trajectories, "state": summary.state}


def _step_out(step: runs.StepFigures, *, measures: bool) -> dict:
    return {"step": step.number, "batch": step.batch_name, "batch_id": step.batch_id, "trajectories": step.trajectories,
            "updating": step.updating, "pruned": step.pruned, "trainer_wait_s": step.trainer_wait,
            "measures": step.measures if measures else None}


@api.get("/runs", response={200: list[schemas.TrainingRunOut], **ERRORS}, tags=["runs"])
def runs_list(request, query: Query[schemas.RunQuery]):
    """The training runs, newest first (at most 100); `name` finds one by its name."""
    require(request, READER)
    found = Run.objects.all()
    if query.name is not None:
        found = found.filter(name=query.name)
    return [_run_out(summary) for summary in runs.runs_overview(found[:100])]


@api.get("/runs/{run_id}", response={200: schemas.TrainingRunDetailOut, **ERRORS}, tags=["runs"])
def run_detail(request, run_id: int):
    """A run and its steps (404 names an unknown run)."""
    require(request, READER)
    run = _run(run_id)
    [summary] = runs.runs_overview([run])
    return {**_run_out(summary), "step_list": [_step_out(step, measures=False) for step in runs.run_steps(run)]}


@api.get("/runs/{run_id}/steps/{step}", response={200: schemas.RunStepOut, **ERRORS}, tags=["runs"])
def run_step(request, run_id: int, step: int):
    """One step of a run with its stored figures (404 names the run's steps when it has no such step)."""
    require(request, GRADER)
    run = _run(run_id)
    if not RunStep.objects.filter(run=run, number=step).exists():
        numbers = RunStep.objects.filter(run=run).order_by("number").values_list("number", flat=True)
        have = f"its steps run from {numbers.first()} to {numbers.last()}" if numbers else "it has no step yet"
        raise Http404(f"run {run.name!r} has no step {step} ({have})")
    figures = runs.run_figures(run, viewer=Viewer(request.user), measures=True)
    return _step_out(next(s for s in figures.steps if s.number == step), measures=True)


@api.get("/runs/{run_id}/figures", response={200: schemas.RunFiguresOut, **ERRORS}, tags=["runs"])
def run_figures(request, run_id: int):
    """Every step's stored figures, in order: what the run page charts (docs/runs.md)."""
    require(request, GRADER)
    figures = runs.run_figures(_run(run_id), viewer=Viewer(request.user), measures=True)
    return {"run": figures.run.name, "steps": [_step_out(step, measures=True) for step in figures.steps]}


@api.get("/runs/{run_id}/advantages", response={409: schemas.ErrorOut, **ERRORS}, tags=["runs"], openapi_extra={
    "responses": {200: {"description": "a tar of the Parquet dataset partitioned by step (`step=<n>/advantages."
                                       "parquet`) and its `_manifest.json`",
                        "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}}}})
def run_advantages(request, run_id: int, query: Query[schemas.RunExportQuery]):
    """The advantages of every step of the run, each under its step's config, as one Parquet
    dataset partitioned by step with one manifest (config per step, counts, checksums), streamed
    as a tar. While a step's grading is queued or running: 409 unless `allow_ungraded`."""
    require(request, EXPORTER)
    from webapp.runs.exports import run_dataset_tar

    run = _run(run_id)
    try:
        stream = run_dataset_tar(run, viewer=Viewer(request.user), allow_ungraded=query.allow_ungraded)
    except exports.GradingUnfinished as error:
        return Status(409, {"errors": [str(error)]})
    response = StreamingHttpResponse(stream, content_type="application/x-tar")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-advantages.tar"'
    return response
