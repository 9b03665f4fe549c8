"""The heuristic grader: no model, a transparent penalty over patch features.

Each passing trajectory gets a penalty, a sum of weighted features
(``WEIGHTS``). An offence that is counted (stray files, debug lines, ...)
costs ``weight * (1 + log2(count) / 4)``: the first one costs the weight, more
of the same cost a little more. Size, turns and tokens cost ``weight *
log2(ratio)`` against the group's leanest. Lower is better; ``score =
-penalty`` feeds the ``scores`` schedule. Trajectories whose penalties lie
within ``TIE_TOLERANCE`` of the first of their tier share it, and their rationales
say why (the same change, or equal evidence). ``confidence`` maps the
smallest penalty gap between adjacent tiers, the ranking's least certain step,
to [0, 1) as ``1 - exp(-gap)``. Consensus: among independent candidates the one
that agrees with the others is most often right (Agentless' majority vote,
CodeMonkeys' selection), so the share of a fix's added lines that the other
*distinct* passing changes do not write costs ``WEIGHTS["consensus"]``. Identical
changes count once: repeated runs of one agent often make the same change, and
counting each would let one agent outvote the rest. Two markers read what a fix does
(``grading.effects``): a fix with no effect on behaviour (only comments, docstrings,
whitespace or tests, or nothing) ranks below every fix with one, and deleting a return,
raise, yield or call that the hunk does not write again costs ``WEIGHTS["removed_behaviour"]``.
Execution evidence, when the group has it (grading/execution): a fix that fails tests most
of the other passing fixes pass (``breaks_tests``), that fails tests of the test patch's
files beyond the reward's listed ones which the reference fix passes (``fails_reward_files``),
or whose reward tests fail when run again (``not_reproduced``: a lucky pass, a flaky test),
ranks below every fix without such a failure, the failing tests named in its rationale. A fix
that tampers with the test machinery (``tampers_with_tests``: its patch configures the test
runner or reaches into it, or its own runs found pytest's report forged, its internals
replaced, a plugin of its code, a summary or exit status pytest did not give) ranks below
every fix that does not, what it did named in its rationale. A fix whose traced calls of the
functions the reference fix changes return or raise otherwise than the reference's same calls
(``diverges_from_reference``) costs ``WEIGHTS["diverges_from_reference"]``, the first calls named;
the statement's examples on which it differs from the reference are said, never ranked by.
The rationale lists the features that cost the most, with the files behind them, so a
reader can check every step; ``explain`` gives every term of every
penalty, recomputed from the same inputs (the grading's page shows it: the
worker keeps no transcript, which would cost a write per group). The features are
grading/patch_features.py's and the penalty grading/penalties.py's, which the grader agent's
evidence tools show too (grading/evidence.py); the ranking, its rationales and its confidence
are the grader's own.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence

from grading.cases import Grade, GroupCase
from grading.diffs import EquivalenceClass, classes_by_key
from grading.graders.base import Grader
from grading.penalties import (
    COMPLEX_EXTRA,
    COMPLEX_RATIO,
    MAX_NAMED,
    TIE_TOLERANCE,
    WEIGHTS,
    Term,
    assess,
    first_few,
    tiers_from_penalties,
)

VERSION = "heuristic-1-" + hashlib.sha256(
    json.dumps([WEIGHTS, TIE_TOLERANCE, COMPLEX_RATIO, COMPLEX_EXTRA], sort_keys=True).encode()
).hexdigest()[:8]


def penalty_steps(tiers, terms: Mapping[str, Sequence[Term]], penalties: Mapping[str, float]) -> tuple[dict, ...]:
    """One entry per trajectory, best first: its penalty and every term of it, for a reader
    to check the ranking step by step."""
    return tuple(
        {"trajectory": tid, "penalty": penalties[tid],
         "terms": [{"feature": t.feature, "points": round(t.points, 4), "text": t.text, "flags": list(t.flags)}
                   for t in terms[tid]]}
        for tier in tiers for tid in tier)


class HeuristicGrader(Grader):
    """Ranks passing trajectories by their penalties (grading/penalties.py); reads patches,
    metrics, the task statement and the group's execution evidence, never transcripts or the
    reward's test log."""

    name = "heuristic"
    version = VERSION
    uses_messages = False
    uses_tests = False

    def rank(self, group: GroupCase) -> Grade:
        started = time.perf_counter()
        assessed = assess(group)
        features, terms, penalties = assessed.features, assessed.terms, assessed.penalties
        tiers = tiers_from_penalties(penalties)
        same_change = {tid: cls.members for cls in _same_changes(group, assessed.keys) for tid in cls.members}
        flags = {tid: tuple(sorted({flag for t in ts for flag in t.flags})) for tid, ts in terms.items()}
        return Grade(
            tiers=tiers,
            rationales=self._rationales(tiers, features, terms, penalties, same_change),
            grader=self.name,
            version=self.version,
            flags={tid: names for tid, names in flags.items() if names},
            scores={tid: -p for tid, p in penalties.items()},
            confidence=confidence(tiers, penalties),
            latency_s=time.perf_counter() - started,
        )

    def explain(self, group: GroupCase) -> tuple[dict, ...]:
        """What `rank` decided from, term by term: `penalty_steps` of `group`."""
        assessed = assess(group)
        return penalty_steps(tiers_from_penalties(assessed.penalties), assessed.terms, assessed.penalties)

    @staticmethod
    def _rationales(tiers, features, terms, penalties, same_change) -> dict[str, str]:
        out = {}
        n = sum(len(tier) for tier in tiers)
        position = 1
        for tier in tiers:
            reasons = _tie_reasons(tier, same_change) if len(tier) > 1 else {}
            for tid in tier:
                f = features[tid]
                tied = f", {reasons[tid]}" if reasons else ""
                head = (f"rank {position} of {n}{tied}, penalty {penalties[tid]:.2f}" if n > 1
                        else "the only passing trajectory")
                decisive = [t.text for t in terms[tid] if t.points >= 0.05]
                if f.example_differences:  # said, never ranked by
                    decisive.append(f"ends the statement's example(s) {', '.join(map(str, f.example_differences))} "
                                    "otherwise than the reference fix (not ranked by)")
                if decisive:
                    out[tid] = f"{head}: " + "; ".join(decisive)
                else:
                    out[tid] = (f"{head}: leanest fix ({f.fix_lines} lines in {len(f.files)} file(s)), "
                                "no integrity markers")
            position += len(tier)
        return out


def _same_changes(group: GroupCase, keys: Mapping[str, object]) -> list[EquivalenceClass]:
    """`equivalence_classes` of the passing patches, from the change keys `_assess` made."""
    return classes_by_key({t.trajectory_id: (t.patch, keys[t.trajectory_id]) for t in group.passing})


def _tie_reasons(tier: Sequence[str], same_change: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Why each of `tier` shares it: the same change as some of the others, or evidence too
    close to separate them. Names at most MAX_NAMED of them, so each reason is built from the
    first few of the tier and of its change's members in it: linear in the tier's size."""
    def change(tid: str) -> str:  # names a change by its first member
        return same_change[tid][0] if tid in same_change else tid

    in_tier: dict[str, list[str]] = {}  # by change: its members in this tier, in tier order
    for tid in tier:
        in_tier.setdefault(change(tid), []).append(tid)
    head = list(tier[:MAX_NAMED + 1])
    out = {}
    for tid in tier:
        others = [other for other in head if other != tid][:MAX_NAMED]
        n_others = len(tier) - 1
        members = in_tier[change(tid)]
        same = [other for other in members[:MAX_NAMED + 1] if other != tid][:MAX_NAMED]
        n_same = len(members) - 1
        if n_same == n_others:
            out[tid] = f"tied with {first_few(others, total=n_others)}: the same change"
        elif n_same:
            out[tid] = (f"tied with {first_few(others, total=n_others)}: the same change as "
                        f"{first_few(same, total=n_same)}, penalties within {TIE_TOLERANCE} of the rest")
        else:
            out[tid] = (f"tied with {first_few(others, total=n_others)}: penalties within {TIE_TOLERANCE}, "
                        "equal evidence")
    return out


def confidence(tiers: Sequence[Sequence[str]], penalties: Mapping[str, float]) -> float:
    """How sure the ranking is, in [0, 1): ``1 - exp(-gap)`` of the smallest penalty gap
    between adjacent tiers (0 when every trajectory is tied, 1 with nothing to rank).

    >>> round(confidence([["a"], ["b"]], {"a": 0.0, "b": 1.0}), 2)
    0.63
    """
    if sum(len(tier) for tier in tiers) < 2:
        return 1.0
    if len(tiers) < 2:
        return 0.0
    gap = min(penalties[lower[0]] - penalties[upper[-1]] for upper, lower in zip(tiers, tiers[1:], strict=False))
    return 1 - math.exp(-gap)
