"""Measure a grader against a proxy of quality: similarity to each task's reference fix.

The grader ranks the batch's groups in-process now, so the figures are those of the
grader as it is installed, never of stored gradings made by an older version or of a
partly finished run. The table (grading.evaluation.format_table) gives the grader and
the trivial baselines, measured in the same run, with 95% bootstrap intervals.
"""

from django.core.management.base import BaseCommand, CommandError

from grading.cases import GraderError
from grading.evaluation import ReferenceGroup, evaluate, format_table
from grading.profiles import ProfileError, build_grader, load_profiles
from webapp.cases import group_cases
from webapp.models import Batch, Group


class Command(BaseCommand):
    help = "Rank a batch's groups with a grader and measure the ranking against the reference fixes (a proxy)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", required=True, help="batch name")
        parser.add_argument("--grader", default="heuristic", help="grader profile (default: heuristic)")

    def handle(self, *args, **options):
        batch = Batch.objects.filter(name=options["batch"]).first()
        if batch is None:
            raise CommandError(f"batch: no batch named {options['batch']!r}")
        try:
            profile = load_profiles()[options["grader"]]
        except ProfileError as error:
            raise CommandError(str(error)) from error
        except KeyError:
            raise CommandError(f"grader: no profile named {options['grader']!r} "
                               f"(known: {', '.join(sorted(load_profiles()))})") from None
        groups = reference_groups(batch)
        if not groups:
            raise CommandError(f"batch {batch.name!r}: no group has a reference_patch to measure against")
        try:
            grader = build_grader(profile)
            grades = grader.rank_many([g.view for g in groups])
        except GraderError as error:
            raise CommandError(f"grader {profile.name!r}: {error}") from error
        failed = [(g.view.group_id, grade) for g, grade in zip(groups, grades, strict=True)
                  if isinstance(grade, GraderError)]
        if failed:
            group_id, error = failed[0]
            raise CommandError(f"grader {profile.name!r} failed on {len(failed)} group(s), "
                               f"first {group_id!r}: {error}")
        tiers = {g.view.group_id: grade.tiers for g, grade in zip(groups, grades, strict=True)}
        evaluation = evaluate(groups, {f"{profile.name} ({grader.version})": lambda view: tiers[view.group_id]})
        self.stdout.write(f"batch {batch.name!r}, ranked in-process now by grader {profile.name!r} "
                          f"version {grader.version} (stored gradings are not read)")
        self.stdout.write(format_table(evaluation))


def reference_groups(batch: Batch) -> list[ReferenceGroup]:
    """The groups of `batch` that have a reference fix, as the grader sees them, by group id."""
    references = dict(Group.objects.filter(batch=batch).exclude(reference_patch=None).exclude(reference_patch="")
                      .values_list("pk", "reference_patch"))
    found = group_cases(references)
    return [ReferenceGroup(case, references[pk]) for pk, case in sorted(found.items(), key=lambda kv: kv[1].group_id)]
