"""Rewards for replaying stored rollouts: look them up in an advantages export.

    from gagar_client.offline import advantages_for
    rewards = advantages_for("advantages.parquet", [("task-1", "r0"), ("task-1", "r1")])

Reads the export's `reward_for_trainer` column (the GAGAR advantage: given as the
reward to a trainer that only subtracts the group mean, it comes back unchanged;
docs/training.md). Parquet needs pyarrow, imported only when a Parquet file is read;
JSON Lines needs nothing beyond the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

Key = tuple[str, str]  # (group_id, trajectory_id)
COLUMNS = ("group_id", "trajectory_id", "reward_for_trainer")


class MissingTrajectories(KeyError):
    """Keys asked for that the export does not hold."""

    def __init__(self, path: Path, missing: list[Key]):
        self.path, self.missing = path, missing
        shown = ", ".join(f"{g}/{t}" for g, t in missing[:5]) + (" ..." if len(missing) > 5 else "")
        super().__init__(f"{path}: {len(missing)} trajectories are not in this export: {shown}")

    def __str__(self) -> str:  # KeyError would show the message quoted
        return self.args[0]


def advantages_for(path: str | Path, keys: Iterable[Key]) -> list[float]:
    """`reward_for_trainer` of each (group_id, trajectory_id) in `keys`, in their order, from
    the advantages export at `path` (.parquet or .jsonl). MissingTrajectories (a KeyError)
    names the keys the export lacks."""
    path = Path(path)
    keys = [(str(g), str(t)) for g, t in keys]
    wanted = set(keys)
    found: dict[Key, float] = {}
    for group_id, trajectory_id, reward in _rows(path):
        key = (group_id, trajectory_id)
        if key in wanted:
            found[key] = reward
    missing = [key for key in dict.fromkeys(keys) if key not in found]
    if missing:
        raise MissingTrajectories(path, missing)
    return [found[key] for key in keys]


def _rows(path: Path) -> Iterable[tuple[str, str, float]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(f"{path}: reading a Parquet export needs pyarrow (pip install pyarrow), "
                              "or export as JSON Lines") from None
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(columns=list(COLUMNS)):
            yield from zip(*(batch.column(name).to_pylist() for name in COLUMNS), strict=True)
    elif path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line_number, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        row = json.loads(line)
                        yield row["group_id"], row["trajectory_id"], row["reward_for_trainer"]
                    except (ValueError, KeyError) as error:
                        raise ValueError(f"{path}:{line_number}: not an advantages export row ({error})") from None
    else:
        raise ValueError(f"{path}: an advantages export ends in .parquet or .jsonl")
