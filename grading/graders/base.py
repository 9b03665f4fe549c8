"""The one grader interface: rank the passing trajectories of a group.

A grader is given a GroupCase and answers a Grade (grading/cases.py): the passing
trajectory ids best first in tiers, a rationale per id, flags from
`grading.rankings.FLAGS`, optional scores, and what it cost. Graders are
registered by name and loaded by dotted path, so the core imports without the
optional extras a backend needs.
"""

from collections.abc import Sequence

from grading.cases import Grade, GraderError, GroupCase
from grading.loading import LoadError, load_object

GRADERS = {
    "heuristic": "grading.graders.heuristic:HeuristicGrader",
    "agentic": "grading.graders.agentic:AgenticGrader",
    "hybrid": "grading.graders.hybrid:HybridGrader",
}


class Grader:
    """Base class: subclasses set `name` and `version` and implement `rank`."""

    name: str = ""
    version: str = ""
    uses_messages: bool = True
    """Whether `rank` reads transcripts (TrajectoryCase.messages). A grader that sets it
    False may get None there: the worker then does not load them from the database."""
    uses_tests: bool = True
    """Whether `rank` reads test evidence (TrajectoryCase.tests); False as above."""
    uses_code: bool = False
    """Whether `rank` reads and runs the candidates' code (GroupCase.code): only then does the
    worker make it, for the groups with execution evidence."""

    def rank(self, group: GroupCase) -> Grade:
        raise NotImplementedError

    def rank_many(self, groups: Sequence[GroupCase]) -> list[Grade | GraderError]:
        """Grade several groups; one group's failure does not stop the others."""
        results: list[Grade | GraderError] = []
        for group in groups:
            try:
                results.append(self.rank(group))
            except GraderError as error:
                results.append(error)
        return results


def load_grader(name: str, /, **config) -> Grader:
    """A grader by registered name or `module:Class` path, imported only now."""
    try:
        grader_class = load_object(name, GRADERS, what="grader")
    except LoadError as error:
        raise GraderError(str(error), permanent=True) from error
    return grader_class(**config)
