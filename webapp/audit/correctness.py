"""The dashboard's primary measure: each grader version against what people said in the app,
by the functions `manage.py evaluate_grader` measures with (grading.evaluation's
`evaluate_correctness`). webapp.audit.figures stores it as a part of the dashboard's figures.

People's verdicts are the passing trajectories a person marked not truly passing (a lucky
pass, a reward hack) when they ranked a group, and auditors' corrected rankings
(`labelled_groups`, which the command reads too). A version is measured on the labelled
groups it graded, with its latest finished grading of each, beside the baselines on the
same groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from grading.evaluation import RANKINGS_LABEL, CorrectnessResult, LabelledGroup, evaluate_correctness
from webapp.audit.ranking import gradings
from webapp.cases import group_cases
from webapp.models import Annotation, AuditVerdict, Batch, Grading
from webapp.rankings import UNRESTRICTED, chain_heads

GRADER = "grader"  # the version's own ranking among the results (the baselines follow it)
VERDICTS = "lucky passes marked (not truly passing)"


@dataclass(frozen=True)
class Correctness:
    """A version against people's verdicts over `verdict_groups` groups (pairwise accuracy,
    top-1 incorrect rate) and against auditors' corrected rankings over `ranking_groups`
    (pairwise accuracy, top-1 correct rate): each the version's ranking (GRADER), then the
    baselines."""

    verdict_groups: int
    ranking_groups: int
    verdicts: list[CorrectnessResult]
    rankings: list[CorrectnessResult]

    def references(self) -> list[tuple[str, str, list[CorrectnessResult]]]:
        """(reference, its top-1 measure, the results against it) of each reference that has groups."""
        return [(reference, top1, results) for reference, top1, groups, results in (
            (VERDICTS, "top-1 incorrect", self.verdict_groups, self.verdicts),
            (RANKINGS_LABEL, "top-1 correct", self.ranking_groups, self.rankings)) if groups]


def correctness(batch: Batch | None, versions: list[str]) -> dict[str, Correctness]:
    """Each version over the labelled groups of `batch` (None: every batch) it graded."""
    labelled = labelled_groups(batch)
    latest: dict[str, dict[int, tuple]] = {v: {} for v in versions}
    rows = (gradings(batch, versions).filter(status=Grading.Status.DONE, group_id__in=list(labelled))
            .order_by("group_id", "-finished_at", "-pk").values_list("run__grader_version", "group_id", "tiers"))
    for version, group, tiers in rows:
        latest[version].setdefault(group, tuple(tuple(tier) for tier in tiers or ()))
    return {version: _measure(labelled, latest[version]) for version in versions}


def _measure(labelled: dict[int, LabelledGroup], graded: dict[int, tuple]) -> Correctness:
    used = [(group, graded[pk]) for pk, group in labelled.items() if pk in graded]
    # The ranker is handed each group's view: its tiers are looked up by that object (group ids repeat across batches).
    tiers_of = {id(group.view): tiers for group, tiers in used}
    evaluation = evaluate_correctness([group for group, _ in used], {GRADER: lambda view: tiers_of[id(view)]})
    return Correctness(len(evaluation.verdict_groups), len(evaluation.ranking_groups), list(evaluation.verdicts),
                       list(evaluation.rankings))


def labelled_groups(batch: Batch | None) -> dict[int, LabelledGroup]:
    """The groups of `batch` (None: every batch) people reviewed, by pk in group id order, as
    the grader sees them, with what they said: the passing trajectories marked not passing in
    the group's final human ranking or in an auditor's correction, and the latest auditor's
    corrected ranking. A group counts as reviewed once it has a human ranking in its final
    chain or an auditor's correction."""
    final = Annotation.objects.filter(independent=False)
    corrections = AuditVerdict.objects.filter(corrected_version__isnull=False)
    if batch is not None:
        final = final.filter(group__batch=batch)
        corrections = corrections.filter(item__group__batch=batch)
    marks: dict[int, set[str]] = {}
    reviewed: set[int] = set()
    # Read by the dashboard figures' writer and by `evaluate_grader`: both see every ranking.
    for head in chain_heads(final.order_by().values_list("group_id", flat=True).distinct(),
                            viewer=UNRESTRICTED):
        if head.tiers is not None:
            reviewed.add(head.group_id)
            marks.setdefault(head.group_id, set()).update(_marked(head.verdicts))
    saved = {(group, version): (tiers, verdicts) for group, version, tiers, verdicts in Annotation.objects.filter(
        group_id__in=corrections.values("item__group_id")).values_list("group_id", "version", "tiers", "verdicts")}
    rankings: dict[int, tuple] = {}
    for group, version in corrections.order_by("updated_at", "pk").values_list("item__group_id", "corrected_version"):
        tiers, verdicts = saved.get((group, version), (None, None))
        if tiers is None:
            continue
        reviewed.add(group)
        marks.setdefault(group, set()).update(_marked(verdicts))
        rankings[group] = tuple(tuple(tier) for tier in tiers)
    views = group_cases(reviewed)
    return {pk: LabelledGroup(views[pk], reviewed=True, incorrect=frozenset(marks.get(pk, ())),
                              ranking=rankings.get(pk))
            for pk in sorted(reviewed, key=lambda pk: (views[pk].group_id, pk))}


def _marked(verdicts) -> set[str]:
    """The trajectories a ranking's test verdicts mark not passing."""
    return {tid for tid, verdict in (verdicts or {}).items() if not verdict.get("passed", True)}
