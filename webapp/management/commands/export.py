"""Write an export to a path, in this process (no worker), through the worker's own code path.

    manage.py export advantages --batch NAME --format parquet --out adv.parquet [--w-min 0.3 ...]
    manage.py export advantages --run NAME --out run-7/
    manage.py export sft --batch NAME --out sft/ [--seed 0 --validation-share 0.1]

Advantages: the data file at --out and its manifest beside it, `<out>.manifest.json`.
A run (--run): a folder at --out, the Parquet dataset of every step's advantages under that
step's config, partitioned by step, and `_manifest.json` (webapp.runs.exports).
SFT: a folder at --out with its files and `manifest.json`. Files appear only once
complete (built in a hidden folder beside --out, then renamed); an existing --out is
replaced only with --force.
"""

import shutil
import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from webapp.batches.services import normalized_batch_name
from webapp.exports.formats import formats_of
from webapp.exports.services import MANIFEST, ExportError, export_config, export_files, refuse_while_grading
from webapp.management.commands.advantages import add_config_arguments, config_overrides
from webapp.models import Batch, Export, Run
from webapp.rankings import UNRESTRICTED
from webapp.runs.exports import MANIFEST as RUN_MANIFEST
from webapp.runs.exports import write_run_dataset


class Command(BaseCommand):
    help = "Export a batch's advantages (Parquet or JSON Lines) or its grader SFT data to a path."

    def add_arguments(self, parser):
        kinds = parser.add_subparsers(dest="kind", required=True, metavar="{advantages,sft}")
        advantages = kinds.add_parser("advantages", help="one row per trajectory, and a manifest")
        add_format_argument(advantages, Export.Kind.ADVANTAGES)
        add_config_arguments(advantages)
        advantages.add_argument("--allow-ungraded", action="store_true", dest="allow_ungraded",
                                help="export while grading of the batch is queued or running (the manifest "
                                     "counts the groups left ungraded)")
        sft = kinds.add_parser("sft", help="grader SFT examples and preference pairs, and a manifest")
        add_format_argument(sft, Export.Kind.SFT)
        sft.add_argument("--seed", type=int)
        sft.add_argument("--validation-share", type=float, dest="validation_share")
        advantages.add_argument("--run", help="every step of this training run, instead of --batch: a folder at "
                                               "--out, partitioned by step")
        advantages.add_argument("--batch")
        sft.add_argument("--batch", required=True)
        for sub in (advantages, sft):
            sub.add_argument("--out", required=True, help="the file (advantages) or folder (sft) to write")
            sub.add_argument("--force", action="store_true", help="replace --out if it exists")

    def handle(self, *args, kind, batch, out, force, **options):
        if kind == Export.Kind.ADVANTAGES and (batch is None) == (options["run"] is None):
            raise CommandError("give either --batch or --run")
        if options.get("run") is not None:
            return self._run(options["run"], Path(out).absolute(), force, options)
        try:
            batch = Batch.objects.get(name=normalized_batch_name(batch))
        except Batch.DoesNotExist:
            raise CommandError(f"--batch: no batch named {batch!r}") from None
        if kind == Export.Kind.ADVANTAGES:
            if not options["allow_ungraded"]:
                try:
                    refuse_while_grading(batch)
                except ExportError as error:
                    raise CommandError(str(error).replace("(allow_ungraded)", "(--allow-ungraded)")) from None
            given = config_overrides(options)
        else:
            given = {key: options[key] for key in ("seed", "validation_share") if options[key] is not None}
        format = options["format"]
        try:
            config = export_config(batch=batch, kind=kind, format=format, config=given)
        except ExportError as error:
            raise CommandError(str(error)) from None
        out = Path(out).absolute()
        manifest = out.with_name(out.name + ".manifest.json") if kind == Export.Kind.ADVANTAGES else None
        self._check_out(out, manifest, kind, force)
        work = out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            files = export_files(batch=batch, kind=kind, format=format, config=config, folder=work, export_id=None,
                                 created_by=None, viewer=UNRESTRICTED, data_name=out.name if manifest else None)
            if manifest:
                (work / out.name).replace(out)
                (work / MANIFEST).replace(manifest)
            else:
                shutil.rmtree(out, ignore_errors=True)
                work.rename(out)
        except ValueError as error:  # the batch cannot give this export: nothing to export, say
            raise CommandError(str(error)) from None
        except OSError as error:
            raise CommandError(f"--out: {error}") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        written = ", ".join(f"{f['name']} ({f['bytes']:,} bytes)" for f in files)
        self.stdout.write(f"{kind} export of {batch.name}: {written} -> {out}"
                          + (f" and {manifest.name}" if manifest else ""))

    def _run(self, name: str, out: Path, force: bool, options: dict) -> None:
        if options["format"] != "parquet" or config_overrides(options) != {"params": {}}:
            raise CommandError("--run exports each step as Parquet under its own advantage config: no --format "
                               "jsonl or config options")
        run = Run.objects.filter(name=name.strip()).first()
        if run is None:
            raise CommandError(f"--run: no run named {name!r}")
        self._check_out(out, None, "run", force)
        work = out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            manifest = write_run_dataset(run, work, viewer=UNRESTRICTED, allow_ungraded=options["allow_ungraded"])
            shutil.rmtree(out, ignore_errors=True)
            work.rename(out)
        except ExportError as error:
            raise CommandError(str(error).replace("(allow_ungraded)", "(--allow-ungraded)")) from None
        except OSError as error:
            raise CommandError(f"--out: {error}") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.stdout.write(f"advantages of run {run.name}: {len(manifest['steps'])} steps, {manifest['rows']:,} rows "
                          f"-> {out}/ (step=<n>/advantages.parquet and {RUN_MANIFEST})")

    def _check_out(self, out: Path, manifest: Path | None, kind: str, force: bool) -> None:
        if not out.parent.is_dir():
            raise CommandError(f"--out: the folder {out.parent} does not exist")
        if manifest and out.is_dir():
            raise CommandError(f"--out: {out} is a folder; the advantages export is one file")
        if not manifest and out.exists() and not out.is_dir():
            raise CommandError(f"--out: {out} is a file; the {kind} export is a folder")
        existing = [path for path in (out, manifest) if path and path.exists()]
        if existing and not force:
            raise CommandError(f"--out: {existing[0]} exists (--force replaces it)")


def add_format_argument(parser, kind: str) -> None:
    """--format: the formats registered for `kind` (webapp/exports/formats.py), the first by default."""
    names = [fmt.name for fmt in formats_of(kind)]
    parser.add_argument("--format", choices=names, default=names[0])
