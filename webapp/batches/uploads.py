"""Files posted as a form, for an import: the batches page's import form and the API's
multipart import (formats of several files: runs, their reports, a task file).

A form over GAGAR_API_UPLOAD_LIMIT is refused before Django reads it (`limit_upload`).
Django's upload handlers stream each file to disk (or memory, when small); they are
copied under DATA_DIR, each under its own name, since the name is what errors and the
batch's sources show, and removed when the import is done. Formats whose runs are named
by their folder come as archives of run folders, unpacked there too (grading.formats.archives).
"""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler

from grading.formats import FORMATS
from grading.formats.archives import SUFFIXES, Budget, is_archive, unpack_runs
from grading.jsonl import ErrorLog, ImportStopped
from grading.rollouts import RolloutFormatError
from webapp.batches.services import ImportResult, batch_import, import_limits

CHUNK = 1024 * 1024


class UploadTooLarge(ValueError):
    pass


class _UploadLimit(FileUploadHandler):
    """Refuses a form whose length is over GAGAR_API_UPLOAD_LIMIT; the server reads no more
    of a body than its length, so nothing bigger reaches the disk."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        limit = settings.GAGAR_API_UPLOAD_LIMIT
        if content_length > limit:
            raise UploadTooLarge(f"the upload is {content_length} bytes, over the limit of {limit} "
                                 "(GAGAR_API_UPLOAD_LIMIT)")

    def receive_data_chunk(self, raw_data, start):
        return raw_data  # to the next handler, which keeps it

    def file_complete(self, file_size):
        return None


def limit_upload(request) -> None:
    """Makes reading `request`'s form raise UploadTooLarge when it is over the limit: call it
    before anything reads request.POST or request.FILES."""
    request.upload_handlers.insert(0, _UploadLimit(request))


@contextmanager
def received_files(uploads: dict[str, list]) -> Iterator[dict[str, list[Path]]]:
    """`uploads` (role -> Django's uploaded files) saved by role in a fresh folder under
    DATA_DIR, removed on exit with all put there."""
    root = settings.DATA_DIR / "uploads"
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=root))
    try:
        received: dict[str, list[Path]] = {}
        for role, files in uploads.items():
            for index, upload in enumerate(files):
                # A folder each: two uploads may share a name.
                path = folder / role / str(index) / Path(upload.name or "upload").name
                path.parent.mkdir(parents=True)
                with path.open("wb") as out:
                    for chunk in upload.chunks(CHUNK):
                        out.write(chunk)
                received.setdefault(role, []).append(path)
        yield received
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class ImportFailed(Exception):
    """Nothing was imported; `errors` says why, a line each, files named as uploaded."""

    def __init__(self, errors: list[str]):
        super().__init__("\n".join(errors))
        self.errors = errors


class _Names:
    """Shows errors with the files named as uploaded (`runs.zip: run-a/x.traj`), not where
    they were kept."""

    def __init__(self, received: dict[str, list[Path]]) -> None:
        self.kept = [(str(path), path.name) for paths in received.values() for path in paths]

    def add_archive(self, archive: Path, unpacked: Path) -> None:
        self.kept[:0] = [(f"{unpacked}/", f"{archive.name}: "), (str(unpacked), archive.name)]

    def shown(self, errors: list[str]) -> list[str]:
        lines = []
        for line in errors:
            for kept, name in self.kept:
                line = line.replace(kept, name)
            lines.append(line)
        return lines


def batch_import_uploaded(*, uploads: dict[str, list], file_format: str, batch_name: str, user,
                          append: bool, pass_threshold: float | None = None) -> ImportResult:
    """`batch_import` of uploaded files by role (`paths`, `reports`, `tasks`), at the app's
    pass threshold unless given; ImportFailed with every problem. Where the format names runs
    by their folders, each of `paths` is an archive of run folders, and `reports` pair with
    the runs in the order of the archives and, in each, of the run folders' names."""
    threshold = settings.GAGAR_PASS_THRESHOLD if pass_threshold is None else pass_threshold
    with received_files(uploads) as files:
        names = _Names(files)
        paths, reports = files.get("paths", []), files.get("reports", [])
        runs_are_folders = file_format in FORMATS and FORMATS[file_format].runs_are_folders
        if runs_are_folders:
            paths = _unpacked_runs(file_format, paths, reports, names)
        try:
            result = batch_import(paths=paths, reports=reports, tasks=files.get("tasks", []),
                                  file_format=file_format, batch_name=batch_name, user=user,
                                  pass_threshold=threshold, append=append)
        except RolloutFormatError as error:
            raise ImportFailed(names.shown(error.errors.summary().splitlines())) from None
        if runs_are_folders:
            result.notes.note("reports by run: " + ", ".join(
                f"{run.name}: {report.name}" for run, report in zip(paths, reports, strict=True)))
        return result


def _unpacked_runs(file_format: str, archives: list[Path], reports: list[Path], names: _Names) -> list[Path]:
    """The run folders of `archives`, unpacked next to them; ImportFailed when one cannot be
    unpacked or the runs and reports do not pair."""
    errors = ErrorLog(limits=import_limits())
    budget = Budget(settings.GAGAR_API_UPLOAD_LIMIT)
    runs: list[Path] = []
    try:
        for archive in archives:
            if not is_archive(archive.name):
                errors.add(archive.name, None, "file", f"{file_format} names each run by its folder, which an "
                           f"upload does not keep: send an archive ({', '.join(SUFFIXES)}) of run folders")
                continue
            unpacked = Path(tempfile.mkdtemp(dir=archive.parent))
            names.add_archive(archive, unpacked)
            runs += unpack_runs(archive, archive.name, unpacked, budget=budget, errors=errors)
    except ImportStopped:  # at the error limit: errors say so
        pass
    if not errors and len(runs) != len(reports):
        listed = ", ".join(run.name for run in runs)
        errors.add("reports", None, "report", f"the archives hold {len(runs)} runs ({listed}): give one "
                   f"evaluation report per run, in that order; got {len(reports)}")
    if errors:
        raise ImportFailed(names.shown(errors.summary().splitlines()))
    return runs


def in_the_forms_words(errors: list[str], labels: dict[str, str]) -> list[str]:
    """`errors` as the batches page's form says them: the import service names its inputs by
    the command's options (`--batch: batch: ...`, "import with --append"); the form's user
    knows them by `labels`, {form field: label}."""
    words = {"--batch: batch: ": f"{labels['name']}: ", "--from: format: ": f"{labels['file_format']}: ",
             "--report: report: ": f"{labels['reports']}: ", "--tasks: tasks: ": f"{labels['tasks']}: ",
             "import with --append (API: append=true)": f"tick “{labels['append']}”"}
    lines = []
    for line in errors:
        for command, form in words.items():
            line = line.replace(command, form)
        lines.append(line)
    return lines


def import_summary(result: ImportResult) -> list[str]:
    """What an import did, a line each: counts, then what was skipped and how files were read."""
    batch = result.batch
    if result.is_noop:
        head = f"Batch {batch.name}: nothing new, {result.unchanged_trajectories} trajectories already imported."
    else:
        head = (f"Batch {batch.name} {'created' if result.created else 'extended'}: {result.new_groups} new groups, "
                f"{result.new_trajectories} new trajectories.")
    return [head, *result.notes.lines()]
