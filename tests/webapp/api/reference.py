"""Rollouts the heuristic grader can rank, and the reference the API's numbers are checked
against: the core's `gagar_advantages` on the rankings the grader wrote to the database."""

import numpy as np

from grading.advantages import gagar_advantages
from tests.factories import PATCH, group
from webapp.models import Batch
from webapp.rankings import UNRESTRICTED, final_rankings

SPRAWL = PATCH + "".join(f"@@ -{n},1 +{n},2 @@\n x = {n}\n+print('debug {n}')\n" for n in range(10, 40, 5))


def varied(group_id, rewards):
    """A group whose passing trajectories differ in size, so the heuristic grader ranks them."""
    records = group(group_id, rewards)
    for i, record in enumerate(records):
        record["patch"] = SPRAWL if i % 2 else PATCH
    return records


def core_advantages(batch: Batch, rows: list[dict]) -> list[float]:
    """The core's advantages for `rows` (dicts with group_id, trajectory_id, reward, passed,
    in any order) under the batch's stored config and final rankings."""
    config = batch.advantage_config
    groups = {g.group_id: g.pk for g in batch.groups.all()}
    rankings = final_rankings(groups.values(), viewer=UNRESTRICTED)
    order = sorted(groups)
    ranks = [rankings[groups[r["group_id"]]].ranks().get(r["trajectory_id"], 0) if groups[r["group_id"]] in rankings
             else 0 for r in rows]
    capped = set(config.get("flag_names", ())) if config.get("w_flag") is not None else set()
    flagged = np.array([rank > 0 and bool(capped.intersection(rankings[groups[r["group_id"]]].flags.get(
        r["trajectory_id"], ()))) for r, rank in zip(rows, ranks, strict=True)])
    result = gagar_advantages(
        np.array([r["reward"] for r in rows], dtype=float), np.array([order.index(r["group_id"]) for r in rows]),
        np.array([r["passed"] for r in rows]), np.array(ranks), schedule=config["schedule"], params=config["params"],
        flagged=flagged if flagged.any() else None, w_flag=config.get("w_flag"),
        norm_by_std=config["norm_by_std"], unbiased_std=config["unbiased_std"])
    return result.advantages.tolist()
