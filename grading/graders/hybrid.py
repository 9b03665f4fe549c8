"""The hybrid grader: the heuristic's ranking as a prior that the LLM overturns only with a reason.

Per group the heuristic ranks first (no model). Its ranking, by labels, with each label's
penalty terms, is shown in the first user turn after the trajectories, and the agentic loop
runs as usual (same backends, budgets, k; the `evidence_*` tools show the heuristic's
figures). Each run's valid submission is then reconciled with the prior (`reconcile`):

- a pair is *overturned* when the prior ranks x above y and the submission does not (it
  ranks y above x, or ties them);
- the overturn is *justified* when y's rationale says `over X`, X being x's label, and
  says something besides (`gives_reason`);
- unjustified overturns are reverted: the submission's tier positions are the sort keys;
  going through the ids in the prior's order, an id that must stay below some x (every x
  the prior ranks above it, less the justified overturns) and is not gets x's key plus its
  own position, which puts it just below x, ahead of the submission's next tier, and keeps
  the submission's order among ids moved below the same x. Keys only grow, so a moved id
  can take others with it: a justified overturn that would contradict a reverted one
  (the prior's W > X > Y, the submission's Y > W justified and X > Y) gives way.

When the LLM fails for a group (a backend error, a ranking still invalid after the repair
turn), the grade is the heuristic's: every rationale starts "fell back to the heuristic:
<why>", `usage["fallback"]` is 1, the transcript ends with {"event": "fallback"}, and
scores are left out (the heuristic's penalties are on another scale than the LLM's Borda
points). A transient backend error falls back too rather than retrying: the heuristic's
grade is always there.

Confidence: `kept x (1 + c) / 2 x r`, where kept is the share of the pairs the prior
orders that the final ranking keeps in that order (1 when it orders none), c the
heuristic's confidence (`heuristic.confidence`) and r, with k > 1, the runs' agreement
(at least 0), else 1. Agreeing with a sure prior gives about 1, with a close call 0.5;
overturns lower it (and send the group to the annotation queue sooner). A fallback
keeps the heuristic's own confidence.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from grading.cases import Grade, GraderError, GroupCase
from grading.graders.agentic import AgenticGrader, _Run
from grading.graders.heuristic import HeuristicGrader, confidence
from grading.penalties import assess, tiers_from_penalties
from grading.rankings import ranks_from_tiers
from grading.tool_limits import cap
from grading.workspace import Workspace

PRIOR_RULES = (
    "Prior: the heuristic grader's ranking (no model; size, consensus among the candidates, "
    "integrity markers; the evidence tools show its figures), best first. Keep its order "
    "unless the evidence says otherwise. To rank a label above a label the prior ranks "
    "higher, or level with it, write over X in its rationale (X: that label) and why; an "
    "order changed without that is reverted to the prior's."
)
RULES_VERSION = "1"  # of `reconcile` and the fallback; with PRIOR_RULES in the version
VERSION_PREFIX = "hybrid-" + hashlib.sha256((RULES_VERSION + PRIOR_RULES).encode()).hexdigest()[:8]
FALLBACK = "fell back to the heuristic"

Tiers = tuple[tuple[str, ...], ...]


class HybridGrader(AgenticGrader):
    name = "hybrid"

    def __init__(self, backend, *, name: str = "hybrid", **options):
        super().__init__(backend, name=name, **options)
        self.heuristic = HeuristicGrader()
        # prior hash : heuristic version : model, prompt, sampling, budget, k
        self.version = f"{VERSION_PREFIX}:{self.heuristic.version}:{self.version}"

    def rank_many(self, groups: Sequence[GroupCase]) -> list[Grade | GraderError]:
        started = time.perf_counter()
        results = super().rank_many(groups)
        return [self._settled(group, result, time.perf_counter() - started)
                for group, result in zip(groups, results, strict=True)]

    def _prior(self, workspace: Workspace) -> str:
        ev = workspace.evidence
        ranks = ranks_from_tiers(ev.tiers)
        order = list(ev.label)
        lines = [PRIOR_RULES]
        for tier in ev.tiers:
            for tid in sorted(tier, key=order.index):
                tied = [ev.label[t] for t in sorted(tier, key=order.index) if t != tid]
                terms = "; ".join(f"{t.text} [{t.points:.2f}]" for t in ev.terms[tid]) or "no penalty"
                lines.append(f"{ranks[tid]}. {ev.label[tid]} (penalty {ev.penalties[tid]:.2f}"
                             f"{', tied with ' + ', '.join(tied) if tied else ''}): {terms}")
        return cap("\n".join(lines), self.caps.output_chars, "the evidence tools show the rest")

    def _accepted(self, run: _Run, outcome: tuple) -> tuple:
        tiers, rationales, flags = outcome
        prior = run.workspace.evidence.tiers
        final, reverted = reconcile(prior, tiers, rationales, run.workspace.label_of)
        run.log.append({"run": run.index, "event": "prior", "prior": [list(t) for t in prior],
                        "submitted": [list(t) for t in tiers], "reverted": [list(p) for p in reverted]})
        rationales = dict(rationales)
        for y in dict.fromkeys(y for _, y in reverted):
            above = ", ".join(run.workspace.label_of(x) for x, below in reverted if below == y)
            rationales[y] += f" [the prior's order kept: below {above}, as no reason was given over {above}]"
        return final, rationales, flags

    def _settled(self, group: GroupCase, result: Grade | GraderError, latency: float) -> Grade:
        if isinstance(result, GraderError):
            return self._fallback(group, result, latency)
        if len(group.passing) < 2:
            return result
        penalties = assess(group).penalties
        prior = tiers_from_penalties(penalties)
        runs = 1.0 if self.k == 1 else max(result.confidence or 0.0, 0.0)
        combined = kept_share(prior, result.tiers) * (1 + confidence(prior, penalties)) / 2 * runs
        return replace(result, confidence=combined)

    def _fallback(self, group: GroupCase, error: GraderError, latency: float) -> Grade:
        grade = self.heuristic.rank(group)
        why = f"{FALLBACK}: {error}"
        return Grade(
            tiers=grade.tiers,
            rationales={tid: f"{why}. {text}" for tid, text in grade.rationales.items()},
            grader=self.name, version=self.version, flags=grade.flags, scores=None,
            confidence=grade.confidence, usage={**error.usage, "fallback": 1}, latency_s=latency,
            transcript=(*error.transcript, {"event": "fallback", "reason": str(error)}),
        )


def gives_reason(rationale: str, label: str) -> bool:
    """Whether `rationale` justifies ranking its label above, or level with, `label`: it
    says `over LABEL` (the label as written, "over" in any case) and more than that.

    >>> gives_reason("over B: keeps the tests", "B"), gives_reason("over B", "B")
    (True, False)
    >>> gives_reason("better than B", "B"), gives_reason("over BC: smaller", "B")
    (False, False)
    """
    mention = re.compile(rf"\b(?i:over)\s+{re.escape(label)}\b")
    if not mention.search(rationale):
        return False
    return re.search(r"[A-Za-z]{2,}", mention.sub("", rationale)) is not None


def overturned(prior: Tiers, submitted: Tiers) -> list[tuple[str, str]]:
    """Pairs (x, y) the prior ranks x above y and `submitted` does not, in the prior's order."""
    was, now = _positions(prior), _positions(submitted)
    ids = [tid for tier in prior for tid in tier]
    return [(x, y) for x in ids for y in ids if was[x] < was[y] and not now[x] < now[y]]


def reconcile(prior: Tiers, submitted: Tiers, rationales: Mapping[str, str],
              label_of: Callable[[str], str]) -> tuple[Tiers, list[tuple[str, str]]]:
    """`submitted` with its unjustified overturns of `prior` reverted (see the module
    docstring), and those overturns (x, y): x kept above y.

    >>> reconcile((("a",), ("b",)), (("b",), ("a",)), {"b": "smaller"}, str.upper)
    ((('a',), ('b',)), [('a', 'b')])
    >>> reconcile((("a",), ("b",)), (("b",), ("a",)), {"b": "over A: smaller"}, str.upper)
    ((('b',), ('a',)), [])
    """
    pairs = overturned(prior, submitted)
    reverted = [(x, y) for x, y in pairs if not gives_reason(rationales.get(y, ""), label_of(x))]
    justified = set(pairs) - set(reverted)
    was, now = _positions(prior), _positions(submitted)
    key: dict[str, tuple[int, ...]] = {}
    for y in sorted(was, key=lambda t: (was[t], now[t])):
        key[y] = (now[y],)
        for x in key:
            if was[x] < was[y] and (x, y) not in justified and key[y] <= key[x]:
                key[y] = key[x] + (now[y],)
    in_submitted_order = [tid for tier in submitted for tid in tier]
    tiers: dict[tuple[int, ...], list[str]] = {}
    for tid in in_submitted_order:
        tiers.setdefault(key[tid], []).append(tid)
    return tuple(tuple(tiers[k]) for k in sorted(tiers)), reverted


def kept_share(prior: Tiers, final: Tiers) -> float:
    """The share of the pairs `prior` orders that `final` keeps in that order (1 if none)."""
    was, now = _positions(prior), _positions(final)
    ordered = [(x, y) for x in was for y in was if was[x] < was[y]]
    if not ordered:
        return 1.0
    return sum(now[x] < now[y] for x, y in ordered) / len(ordered)


def _positions(tiers: Tiers) -> dict[str, int]:
    return {tid: i for i, tier in enumerate(tiers) for tid in tier}
