"""Real grader classes for the worker tests, loaded by dotted path like any other."""

import json
import re
import time
from dataclasses import asdict

from grading.cases import Grade, GraderError, GroupCase
from grading.graders.base import Grader
from grading.graders.heuristic import HeuristicGrader


class ScriptedGrader(HeuristicGrader):
    """The heuristic grader, except for groups whose id matches one of its patterns:
    `fail_on` raises a permanent GraderError, `transient_on` a transient one, `crash_on`
    a plain exception (a bug), `invalid_on` returns a ranking that leaves a passing id
    out. `delay` seconds are spent on every group."""

    name = "scripted"

    def __init__(self, *, fail_on="", transient_on="", crash_on="", invalid_on="", delay=0.0):
        self.patterns = {kind: re.compile(p) if p else None for kind, p in (
            ("fail", fail_on), ("transient", transient_on), ("crash", crash_on), ("invalid", invalid_on))}
        self.delay = delay
        self.version = f"scripted-{HeuristicGrader.version}"

    def _hit(self, kind: str, group: GroupCase) -> bool:
        pattern = self.patterns[kind]
        return pattern is not None and pattern.search(group.group_id) is not None

    def rank(self, group: GroupCase) -> Grade:
        if self.delay:
            time.sleep(self.delay)
        if self._hit("fail", group):
            raise GraderError(f"cannot grade {group.group_id}: <script>alert(1)</script> is not a patch",
                              permanent=True)
        if self._hit("transient", group):
            raise GraderError(f"backend busy for {group.group_id}", permanent=False)
        if self._hit("crash", group):
            raise ValueError(f"grader bug on {group.group_id}")
        grade = super().rank(group)
        if self._hit("invalid", group):
            return Grade(tiers=grade.tiers[:-1] or (("nobody",),), rationales={}, grader=self.name,
                         version=self.version)
        return Grade(tiers=grade.tiers, rationales=grade.rationales, grader=self.name, version=self.version,
                     flags=grade.flags, scores=grade.scores, latency_s=grade.latency_s)


class EchoGrader(Grader):
    """Ranks the passing trajectories by id and writes, as the first one's rationale, the
    whole group it was handed, as JSON: what a worker gives a grader, for tests to check.
    Reads everything, transcripts and test logs included."""

    name = "echo"
    version = "echo-1"

    def rank(self, group: GroupCase) -> Grade:
        passing = sorted(t.trajectory_id for t in group.passing)
        return Grade(tiers=tuple((tid,) for tid in passing),
                     rationales={passing[0]: json.dumps(asdict(group))}, grader=self.name, version=self.version)
