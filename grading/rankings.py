"""Rankings as people enter them: rank numbers, JSON tiers, one-line summaries.

A ranking is tiers, best first, each tier the ids tied at that place:
``(("b",), ("a", "c"))``. Plain data in, plain data out; validation against a
group's passing ids is `grading.graders.base.validate_ranking`.

>>> tiers_from_ranks({"a": 2, "b": 1, "c": 2, "d": None})
((('b',), ('a', 'c')), ('d',))
>>> summary([["b"], ["a", "c"]])
'b > a = c'
"""

from collections.abc import Mapping, Sequence


def tiers_from_ranks(ranks: Mapping[str, int | None]) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """(tiers, unranked ids) from a rank number per id: smaller is better, equal numbers
    tie, gaps do not matter, None leaves an id unranked. Ids keep their given order
    inside a tier."""
    by_rank: dict[int, list[str]] = {}
    unranked = []
    for item, rank in ranks.items():
        if rank is None:
            unranked.append(item)
        else:
            by_rank.setdefault(rank, []).append(item)
    return tuple(tuple(by_rank[r]) for r in sorted(by_rank)), tuple(unranked)


def parse_tiers(value) -> tuple[tuple[str, ...], ...]:
    """Tiers from decoded JSON: a list of lists of strings; ValueError otherwise."""
    if not isinstance(value, list) or not all(
            isinstance(tier, list) and all(isinstance(item, str) for item in tier) for tier in value):
        raise ValueError("tiers must be a list of lists of trajectory ids, best first")
    return tuple(tuple(tier) for tier in value)


def summary(tiers: Sequence[Sequence[str]]) -> str:
    """One line: ``>`` between tiers, ``=`` inside one."""
    return " > ".join(" = ".join(tier) for tier in tiers)
