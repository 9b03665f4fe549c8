"""Remove the heavy fields of a training run's old steps: transcripts, rendered patches and
search entries. Rankings, gradings, patches, advantages and figures stay; the run page says
which steps were pruned.

    manage.py prune --run NAME --keep-last 50
"""

from django.core.management.base import BaseCommand, CommandError

from webapp.management.database import database_errors_in_one_line
from webapp.models import Run
from webapp.runs.services import run_prune


class Command(BaseCommand):
    help = ("Remove transcripts, rendered patches and search entries of every step of a run but the last "
            "--keep-last; rankings, advantages and figures stay.")

    def add_arguments(self, parser):
        parser.add_argument("--run", required=True, help="the training run")
        parser.add_argument("--keep-last", type=int, required=True, dest="keep_last",
                            help="how many of the latest steps keep everything")

    def handle(self, *args, run, keep_last, **options):
        if keep_last < 0:
            raise CommandError(f"--keep-last: must be 0 or more, got {keep_last}")
        found = Run.objects.filter(name=run.strip()).first()
        if found is None:
            raise CommandError(f"--run: no run named {run!r}")
        with database_errors_in_one_line():
            pruned = run_prune(run=found, keep_last=keep_last)
        if not pruned.steps:
            self.stdout.write(f"run {found.name!r}: nothing to prune (older steps were pruned already)")
            return
        self.stdout.write(f"run {found.name!r}: pruned steps {pruned.steps[0]} to {pruned.steps[-1]} "
                          f"({len(pruned.steps)}): {pruned.transcripts} transcripts, {pruned.renders} rendered "
                          f"patches' links, {pruned.search_entries} search entries removed")
