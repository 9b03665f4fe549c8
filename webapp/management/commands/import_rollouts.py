import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count

from grading.formats import FORMATS
from grading.rollouts import RolloutFormatError
from webapp.batches.services import batch_import
from webapp.management.database import database_errors_in_one_line
from webapp.models import RunStep
from webapp.runs.services import StepRefused, step_import

FORMAT_HELP = "; ".join(f"{f.name}: {f.paths_are}" for f in FORMATS.values())


class Command(BaseCommand):
    help = ("Import rollout files into a batch, whole or not at all: the rollout format (.jsonl, "
            ".jsonl.gz, .jsonl.zst) or, with --from, a format teams already have (docs/rollout-format.md).")

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", help="the files (or runs) to import; see --from")
        parser.add_argument("--batch", help="batch name, e.g. sweep-3 (or give --run and --step)")
        parser.add_argument("--run", help="the training run the rollouts are a step of (created on first use); "
                                          "with --step, the batch is named <run>/step-<step>")
        parser.add_argument("--step", type=int, help="the step's number: after the run's latest, unless --append")
        parser.add_argument("--from", dest="file_format", choices=list(FORMATS), default="jsonl",
                            help=f"the format of PATHS (default jsonl). {FORMAT_HELP}")
        parser.add_argument("--report", dest="reports", action="append", default=[],
                            help="the evaluation report of a run (swebench, swe-agent, openhands): give "
                                 "one per path, in the same order; a folder means its report.json files")
        parser.add_argument("--tasks", dest="tasks", action="append", default=[],
                            help="a SWE-bench task file (.json or .jsonl): statements and reference "
                                 "patches for the groups (swebench, swe-agent)")
        parser.add_argument("--name-by-run", action="store_true",
                            help="swebench: name each trajectory by its run (the run folder, or the predictions "
                                 "file's name) instead of model_name_or_path, for several runs of one model")
        parser.add_argument("--append", action="store_true",
                            help="add to the batch (or the run's step) if it exists (identical rollouts are "
                                 "skipped); without it an existing name, or a step number the run has or has "
                                 "passed, is an error")
        parser.add_argument(
            "--pass-threshold", type=float, default=settings.GAGAR_PASS_THRESHOLD,
            help="reward at or above which a trajectory passes when the line has no `passed`",
        )

    def handle(self, *args, paths, batch, pass_threshold, append, file_format, reports, tasks, name_by_run,
               **options):
        run, step = options["run"], options["step"]
        if (run is None) != (step is None):
            raise CommandError("--run and --step go together: the step's number in the run")
        if (batch is None) == (run is None):
            raise CommandError("give either --batch, or --run and --step")
        started = time.monotonic()
        show_progress = sys.stderr.isatty() and options["verbosity"] > 0

        def progress(count):
            rate = count / max(time.monotonic() - started, 1e-9)
            sys.stderr.write(f"\r  read {count:,} trajectories ({rate:,.0f}/s)")
            sys.stderr.flush()

        with database_errors_in_one_line():
            def import_into(name, extend):
                return batch_import(
                    paths=paths, batch_name=name, pass_threshold=pass_threshold, append=extend,
                    on_progress=progress if show_progress else None,
                    file_format=file_format, reports=reports, tasks=tasks, name_by_run=name_by_run,
                )

            try:
                if run is None:
                    result = import_into(batch, append)
                else:
                    result = step_import(run_name=run, number=step, append=append, import_batch=import_into).result
            except RolloutFormatError as error:
                raise CommandError(f"nothing imported:\n{error}") from None
            except StepRefused as error:
                raise CommandError(f"nothing imported: {error}".replace("append to", "--append to")) from None
            finally:
                if show_progress:
                    sys.stderr.write("\n")
            self.stdout.write(self._summary(result, time.monotonic() - started))

    def _summary(self, result, seconds):
        batch = result.batch
        notes = [f"  {line}" for line in result.notes.lines()]
        if result.is_noop:
            return "\n".join([f"batch {batch.name!r}: nothing new, {result.unchanged_trajectories} "
                              "trajectories already imported with identical content", *notes])
        labels = dict.fromkeys(("mixed", "all_pass", "all_fail", "singleton"), 0)
        for label, count in _label_counts(batch):
            labels[label] = count
        verb = "created" if result.created else "extended"
        step = RunStep.objects.filter(batch=batch).select_related("run").first()
        return "\n".join([
            *([f"run {step.run.name!r}: step {step.number}"] if step else []),
            f"batch {batch.name!r} {verb}: {result.new_groups} new groups, "
            f"{result.new_trajectories} new trajectories in {seconds:.1f}s",
            f"  groups: {batch.n_groups} ("
            + ", ".join(f"{label} {count}" for label, count in labels.items()) + ")",
            f"  trajectories: {batch.n_trajectories}, passed {batch.n_passed} "
            f"(pass rate {batch.pass_rate:.1%})",
            *notes,
        ])


def _label_counts(batch):
    return batch.groups.values_list("label").annotate(n=Count("pk")).order_by()
