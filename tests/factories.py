"""Small rollout records for tests; the project's sample data covers realism."""

import gzip
import json
from pathlib import Path

import zstandard

SAMPLE_ROLLOUTS = Path(__file__).resolve().parent.parent / "sample" / "rollouts.jsonl"

PATCH = (
    "diff --git a/pkg/mod.py b/pkg/mod.py\n"
    "--- a/pkg/mod.py\n"
    "+++ b/pkg/mod.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def f(x):\n"
    "-    return x\n"
    "+    return x + 1\n"
)


def rollout(group_id="g1", trajectory_id="t1", reward=1.0, **fields):
    record = {"group_id": group_id, "trajectory_id": trajectory_id, "reward": reward, "patch": PATCH}
    record.update(fields)
    return record


def group(group_id, rewards, **fields):
    """One record per reward, trajectory ids t1..tn, the task on the first line."""
    records = [rollout(group_id, f"t{i}", r, **fields) for i, r in enumerate(rewards, start=1)]
    records[0]["task"] = {"id": group_id, "statement": f"Fix {group_id}", "repo": "o/r",
                          "base_commit": "0" * 40, "reference_patch": None}
    return records


def write_jsonl(path: Path, records) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records).encode()
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text))
    elif path.name.endswith(".zst"):
        path.write_bytes(zstandard.ZstdCompressor().compress(text))
    else:
        path.write_bytes(text)
    return path
