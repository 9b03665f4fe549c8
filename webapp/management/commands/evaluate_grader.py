"""Measure a grader against people's verdicts, with similarity to the reference fix as a diagnostic.

The measure (grading.evaluation.evaluate_correctness) is what people said in the app: the
passing trajectories a person marked not truly passing when they ranked a group (lucky
passes, reward hacks), and auditors' corrected rankings. A group counts as reviewed once it
has a human ranking in its final chain or an auditor's correction; its passing trajectories
that nobody marked are taken as correct (webapp.audit.correctness.labelled_groups, which the
audit dashboard measures stored gradings against too). The proxy table (similarity to each
task's reference fix) follows, labelled a diagnostic: it is not a target.

The grader ranks the batch's groups in-process now, so the figures are those of the grader
as it is installed, never of stored gradings made by an older version or of a partly
finished run. Every table gives the grader and the trivial baselines, measured in the same
run, with 95% bootstrap intervals over groups.
"""

from django.core.management.base import BaseCommand, CommandError

from grading.cases import GraderError
from grading.evaluation import (
    ReferenceGroup,
    evaluate,
    evaluate_correctness,
    format_correctness,
    format_table,
)
from grading.profiles import ProfileError, build_grader, load_profiles
from webapp.audit.correctness import labelled_groups
from webapp.cases import group_cases
from webapp.models import Batch, Group


class Command(BaseCommand):
    help = ("Rank a batch's groups with a grader and measure the ranking against people's verdicts "
            "(lucky passes marked, audits' corrected rankings); similarity to the reference fixes as a diagnostic.")

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
        labelled = list(labelled_groups(batch).values())
        references = reference_groups(batch)
        if not labelled and not references:
            raise CommandError(f"batch {batch.name!r}: no group has a reference_patch or people's verdicts "
                               "(a ranking by a person, an audit's correction) to measure against")
        views = {g.view.group_id: g.view for g in [*labelled, *references]}
        try:
            grader = build_grader(profile)
            grades = dict(zip(views, grader.rank_many(list(views.values())), strict=True))
        except GraderError as error:
            raise CommandError(f"grader {profile.name!r}: {error}") from error
        failed = [(group_id, grade) for group_id, grade in grades.items() if isinstance(grade, GraderError)]
        if failed:
            group_id, error = failed[0]
            raise CommandError(f"grader {profile.name!r} failed on {len(failed)} group(s), "
                               f"first {group_id!r}: {error}")
        name = f"{profile.name} ({grader.version})"
        rankers = {name: lambda view: grades[view.group_id].tiers}
        self.stdout.write(f"batch {batch.name!r}, ranked in-process now by grader {profile.name!r} "
                          f"version {grader.version} (stored gradings are not read)")
        self.stdout.write(format_correctness(evaluate_correctness(labelled, rankers)))
        if references:
            self.stdout.write("Diagnostic, not a target (it cannot tell a lucky pass from a correct fix):")
            self.stdout.write(format_table(evaluate(references, rankers)))


def reference_groups(batch: Batch) -> list[ReferenceGroup]:
    """The groups of `batch` that have a reference fix, as the grader sees them, by group id."""
    references = dict(Group.objects.filter(batch=batch).exclude(reference_patch=None).exclude(reference_patch="")
                      .values_list("pk", "reference_patch"))
    found = group_cases(references)
    return [ReferenceGroup(case, references[pk]) for pk, case in sorted(found.items(), key=lambda kv: kv[1].group_id)]
