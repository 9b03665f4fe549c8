import json
import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from webapp.batches.services import normalized_batch_name
from webapp.grading.selectors import DONE, FAILED, in_progress, run_takeover, wait_for
from webapp.grading.services import LaunchError, grading_launch
from webapp.management.database import database_errors_in_one_line
from webapp.models import Batch, GradingRun

# Exit statuses of --wait (2 is argparse's, for a bad command line).
EXIT_FAILED, EXIT_CANCELLED = 1, 3


class Command(BaseCommand):
    help = ("Queue grading of a batch's mixed groups for the workers; --wait follows it to the end. "
            f"Exit status: 0 done; {EXIT_FAILED} some gradings failed, or an error (no such batch, a bad "
            f"--config, --timeout reached); {EXIT_CANCELLED} with --wait, the run was cancelled.")

    def add_arguments(self, parser):
        parser.add_argument("--batch", required=True)
        parser.add_argument("--grader", default="heuristic", help="a registered name or module:Class")
        parser.add_argument("--config", default="{}", help="the grader's keyword arguments, as JSON")
        parser.add_argument("--regrade", action="store_true", help="also groups this grader already graded")
        parser.add_argument("--queue", help="override the grader's queue (cpu or gpu)")
        parser.add_argument("--wait", action="store_true",
                            help=f"show progress until done; exit {EXIT_FAILED} if any failed, "
                                 f"{EXIT_CANCELLED} if the run was cancelled")
        parser.add_argument("--timeout", type=float, help="with --wait: give up after this many seconds")

    def handle(self, *args, **options):
        with database_errors_in_one_line():
            self._grade(**options)

    def _grade(self, *, batch, grader, config, regrade, queue, wait, timeout, **options):
        try:
            batch = Batch.objects.get(name=normalized_batch_name(batch))
        except Batch.DoesNotExist:
            raise CommandError(f"no batch named {batch!r}") from None
        try:
            config = json.loads(config)
        except json.JSONDecodeError as error:
            raise CommandError(f"--config is not JSON: {error}") from None
        if not isinstance(config, dict):
            raise CommandError("--config must be a JSON object")
        try:
            launch = grading_launch(batch=batch, grader=grader, config=config, regrade=regrade, queue=queue)
        except LaunchError as error:
            raise CommandError(str(error)) from None
        if launch.active_run:
            run = launch.active_run
            self.stdout.write(f"nothing to grade: run {run.pk} ({run.grader}) is already grading these groups "
                              f"({in_progress(run)} queued or running)" + ("; following it" if wait else ""))
            if wait:
                self._follow(run, timeout)
            return
        if launch.run is None:
            self.stdout.write(f"nothing to grade: {launch.skipped} mixed groups already graded "
                              "(--regrade grades them again)")
            return
        self.stdout.write(f"run {launch.run.pk}: {launch.queued} groups queued on {launch.run.queue!r}"
                          + (f", {launch.skipped} skipped" if launch.skipped else ""))
        if launch.broker_error:
            self.stdout.write(f"not sent yet: {launch.broker_error}; the sweep sends them once it is back")
        if launch.evidence_off:
            self.stdout.write(launch.evidence_off)
        if wait:
            self._follow(launch.run, timeout)

    def _follow(self, run: GradingRun, timeout: float | None) -> None:
        """Show `run`'s progress until it ends; CommandError (exit status above) unless all is done."""
        try:
            counts = wait_for([run.pk], timeout=timeout, on_progress=self._progress)
        except TimeoutError as error:
            raise CommandError(f"timed out: {error}") from None
        self.stdout.write("")
        for failure in run.gradings.filter(status=FAILED).values("group__group_id", "error"):
            self.stderr.write(f"failed {failure['group__group_id']}: {failure['error']}")
        run = GradingRun.objects.select_related("cancelled_by", "batch").get(pk=run.pk)
        self._say_takeover(run)
        if run.cancelled_at is not None:
            by = f" by {run.cancelled_by.get_username()}" if run.cancelled_by else ""
            at = timezone.localtime(run.cancelled_at).strftime("%Y-%m-%d %H:%M:%S %Z")
            raise CommandError(f"run {run.pk} was cancelled{by} at {at}: {counts[DONE]} of "
                               f"{sum(counts.values())} groups graded", returncode=EXIT_CANCELLED)
        if counts[FAILED]:
            raise CommandError(f"{counts[FAILED]} of {sum(counts.values())} groups failed", returncode=EXIT_FAILED)

    def _say_takeover(self, run: GradingRun) -> None:
        """Which final rankings the run's gradings became: the batch's next export uses them."""
        takeover = run_takeover(run)
        if not takeover.final and not takeover.kept_human:
            return
        line = (f"final rankings: run {run.pk} ({run.grader}) now ranks {takeover.final} groups "
                f"of batch {run.batch.name!r}")
        if takeover.replaced:
            line += "; it replaced the final ranking of " + ", ".join(
                f"{n} by {grader}" for grader, n in sorted(takeover.replaced.items()))
        if takeover.kept_human:
            line += f"; {takeover.kept_human} keep a person's ranking"
        self.stdout.write(line)
        if takeover.fell_back:
            self.stdout.write(f"{takeover.fell_back} of them fell back to the heuristic's ranking: the model's answer "
                              "could not be used (each grading's page says why)")

    def _progress(self, counts):
        if counts == getattr(self, "_last", None):
            return
        self._last = counts
        line = ", ".join(f"{status} {n}" for status, n in counts.items())
        if self.stdout.isatty():
            self.stdout.write(f"\r{line}", ending="")
        else:
            self.stdout.write(line)
        sys.stdout.flush()
