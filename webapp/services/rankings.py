"""The final ranking of a group: what advantages and pages use.

For now the latest finished grading's ranking (source "grader"); human
rankings will take precedence here once they exist, and every caller goes
through `final_rankings`, so they will not need to change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from grading.graders.base import ranks_from_tiers
from webapp.models import Grading

CHUNK = 5000  # ids per query: SQLite caps the number of bound parameters


@dataclass(frozen=True)
class FinalRanking:
    """Passing trajectory ids best first in tiers (ties share a tier), flags per id,
    the grader's scores if any (higher is better), and where the ranking came from."""

    tiers: tuple[tuple[str, ...], ...]
    flags: Mapping[str, tuple[str, ...]]
    scores: Mapping[str, float] | None
    source: str
    grading_id: int | None
    grader_version: str
    rationales: Mapping[str, str] = field(default_factory=dict)

    def ranks(self) -> dict[str, int]:
        """Standard competition ranks, 1 = best: (1, 2, 2, 4)."""
        return ranks_from_tiers(self.tiers)


def final_rankings(group_pks: Iterable[int]) -> dict[int, FinalRanking]:
    """The final ranking of each group in `group_pks` that has one, by group pk."""
    pks = list(dict.fromkeys(group_pks))
    out: dict[int, FinalRanking] = {}
    for start in range(0, len(pks), CHUNK):
        rows = (Grading.objects.filter(group_id__in=pks[start:start + CHUNK], status=Grading.Status.DONE)
                .order_by("group_id", "-finished_at", "-pk")
                .values_list("group_id", "pk", "tiers", "flags", "scores", "grader_version", "rationales"))
        for group_pk, pk, tiers, flags, scores, version, rationales in rows:
            if group_pk in out:
                continue
            out[group_pk] = FinalRanking(
                tiers=tuple(tuple(tier) for tier in tiers or ()),
                flags={tid: tuple(names) for tid, names in (flags or {}).items()},
                scores=scores,
                source="grader",
                grading_id=pk,
                grader_version=version,
                rationales=rationales or {},
            )
    return out
