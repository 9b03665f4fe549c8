"""The heuristic grader's evidence as the grader agent's tools show it: consensus across
the candidates, integrity markers, minimality.

Every figure is the heuristic's own (`penalties.assess`, `patch_features.group_minima`,
`diffs.equivalence_classes`, `diffs.patch_stats`), so a model starts from what the
heuristic knows and the two never disagree about a fact. Only passing trajectories are
assessed, as the heuristic ranks only those; each is named by its workspace label, never
by its id. The texts are uncapped here: the workspace caps them like every tool output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from grading import penalties
from grading.cases import GroupCase
from grading.diffs import ParsedPatch, PatchStats, equivalence_classes, patch_stats
from grading.patch_features import Features, group_minima

# The penalty terms that mark the integrity of a change rather than its size or scope.
INTEGRITY = ("unreadable", "special_cases", "test_removals", "test_edits", "stray_files",
             "debug_output", "commented_code", "whitespace", "removed_behaviour", "no_effect",
             "breaks_tests", "fails_reward_files", "not_reproduced", "tampers_with_tests",
             "diverges_from_reference")


@dataclass(frozen=True)
class Evidence:
    """The heuristic's assessment of one group's passing trajectories, by id, with labels."""

    label: Mapping[str, str]  # id -> label, the passing ids in label order
    features: Mapping[str, Features]
    terms: Mapping[str, Sequence[penalties.Term]]
    penalties: Mapping[str, float]
    stats: Mapping[str, PatchStats]
    same_change: tuple[tuple[str, ...], ...]  # ids whose patches are one change, label order

    @property
    def tiers(self) -> tuple[tuple[str, ...], ...]:
        """The heuristic's ranking (its `rank` computes the same from the same penalties)."""
        return penalties.tiers_from_penalties(self.penalties)


def assess(group: GroupCase, passing_labels: Sequence[str], id_of: Callable[[str], str],
           parsed: Mapping[str, ParsedPatch]) -> Evidence:
    """The evidence of `group`: `passing_labels` in label order, `id_of` a label's trajectory
    id, `parsed` each label's parsed patch (the workspace's, parsed once)."""
    label = {id_of(lab): lab for lab in passing_labels}
    assessed = penalties.assess(group)
    patch = {t.trajectory_id: t.patch for t in group.passing}
    return Evidence(
        label=label, features=assessed.features, terms=assessed.terms, penalties=assessed.penalties,
        stats={id_of(lab): patch_stats(parsed[lab]) for lab in passing_labels},
        same_change=tuple(c.members for c in equivalence_classes({tid: patch[tid] for tid in label})),
    )


def consensus_text(ev: Evidence) -> str:
    lines = [
        "Consensus among the passing trajectories (the heuristic's evidence): for each, the "
        "share of its added code lines (whitespace ignored; tests, stray files, debug and "
        "commented-out lines left out) that each other distinct passing change also adds. "
        "Changes that are the same up to whitespace count once.",
        "Same change: " + ("; ".join("=".join(ev.label[t] for t in ids) for ids in ev.same_change)
                           or "none"),
    ]
    distinct = _distinct_adding(ev)
    for tid, lab in ev.label.items():
        f = ev.features[tid]
        if not f.added_lines:
            lines.append(f"{lab}: adds no code lines: no vote, nothing to compare")
            continue
        others = [ids for ids in distinct if tid not in ids]
        if not others:
            lines.append(f"{lab}: {len(f.added_lines)} added line(s); no other distinct "
                         "passing change adds code")
            continue
        each = ", ".join(f"{'='.join(ev.label[t] for t in ids)} "
                         f"{_share(f.added_lines, ev.features[ids[0]].added_lines):.0%}" for ids in others)
        lines.append(f"{lab}: {len(f.added_lines)} added line(s), {1 - f.unshared_added:.0%} shared "
                     f"on average with the {len(others)} other distinct change(s) ({each})")
    return "\n".join(lines)


def integrity_text(ev: Evidence) -> str:
    lines = ["Integrity markers of the passing trajectories (the heuristic's evidence, with "
             "its penalty points; the markers come from grading/diffs.py):"]
    for tid, lab in ev.label.items():
        found = [f"{t.text} [{t.points:.2f}]" for t in ev.terms[tid] if t.feature in INTEGRITY]
        lines.append(f"{lab}: " + ("; ".join(found) if found else "none found"))
    return "\n".join(lines)


def minimality_text(ev: Evidence) -> str:
    least = group_minima(ev.features[tid] for tid in ev.label)
    leanest, fewest = least["leanest"], least["fewest_files"]
    lines = [f"Minimality of the passing trajectories (the heuristic's evidence): fix lines are "
             f"changed lines outside tests and stray files, less whitespace-only hunks, debug "
             f"and commented-out lines. Leanest fix: {leanest} line(s); fewest files: {fewest}."]
    for tid, lab in ev.label.items():
        f, stats = ev.features[tid], ev.stats[tid]
        ratio = "leanest" if f.fix_lines == leanest else f"{max(f.fix_lines, 1) / max(leanest, 1):.1f}x the leanest"
        extra = len(f.files) - fewest
        line = (f"{lab}: fix {f.fix_lines} line(s) ({ratio}), files {len(f.files)}"
                f"{f' (+{extra} over the fewest)' if extra else ''}, hunks {stats.hunks}, "
                f"+{stats.lines_added} -{stats.lines_removed}")
        if f.unneeded_files:
            line += f"; files no other passing fix needed: {', '.join(f.unneeded_files)}"
        lines.append(line)
    return "\n".join(lines)


def _distinct_adding(ev: Evidence) -> list[tuple[str, ...]]:
    """The distinct changes that add code, each as its ids (label order): what the
    heuristic's consensus term compares a change with."""
    grouped = {tid for ids in ev.same_change for tid in ids}
    changes = list(ev.same_change) + [(tid,) for tid in ev.label if tid not in grouped]
    order = {tid: i for i, tid in enumerate(ev.label)}
    changes.sort(key=lambda ids: order[ids[0]])
    return [ids for ids in changes if ev.features[ids[0]].added_lines]


def _share(lines: frozenset[str], other: frozenset[str]) -> float:
    return len(lines & other) / len(lines)
