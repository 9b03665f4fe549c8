"""Seeded random rankings with ties, for checking measures against scipy and krippendorff."""

import random


def random_tiers(rng: random.Random, items) -> list[list[str]]:
    """`items` shuffled into tiers; each item joins the tier before it with chance 0.3."""
    items = list(items)
    rng.shuffle(items)
    tiers: list[list[str]] = []
    for item in items:
        if tiers and rng.random() < 0.3:
            tiers[-1].append(item)
        else:
            tiers.append([item])
    return tiers
