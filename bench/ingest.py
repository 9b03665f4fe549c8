"""Import throughput into PostgreSQL against a raw COPY of the same rows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gagar .venv/bin/python bench/ingest.py

Writes N trajectories (2 KB patches, groups of 16) to a .jsonl file, imports
it with `import_rollouts` into a fresh database, then COPYs the same parsed
rows into a plain unindexed table in the same database: the floor. Prints
rows/s for both and their ratio. Then runs the import in child processes on
files of 1/4 and the full size and prints each one's peak RSS, to show that
memory stays flat in file size (the import streams).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database  # noqa: E402

BENCH_DB = "gagar_bench"


def write_rollouts(path: Path, n: int, group_size: int = 16) -> None:
    body = "".join(f"+    value_{i} = compute(value_{i - 1}, {i})  # keep the line ~40 bytes\n"
                   for i in range(45))
    with path.open("w") as f:
        for i in range(n):
            group, member = divmod(i, group_size)
            patch = (f"diff --git a/pkg/m{group}.py b/pkg/m{group}.py\n--- a/pkg/m{group}.py\n"
                     f"+++ b/pkg/m{group}.py\n@@ -1,1 +1,46 @@\n def f():\n{body}")[:2048]
            record = {
                "group_id": f"task-{group:06d}", "trajectory_id": f"r{member}",
                "reward": float((i * 7) % 3 == 0), "patch": patch,
                "metrics": {"num_turns": 20 + member, "output_tokens": 1000 * member},
            }
            if member == 0:
                record["task"] = {"id": f"task-{group:06d}", "statement": "Fix the bug. " * 20}
            f.write(json.dumps(record) + "\n")


def setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()


def time_import(path: Path, batch: str) -> float:
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("import_rollouts", str(path), batch=batch, verbosity=0)
    return time.perf_counter() - started


def time_raw_copy(path: Path) -> float:
    """The floor: parse each line (with orjson, as the import does) and COPY its fields
    into a plain table with no index, constraint or check."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TABLE IF EXISTS raw_rollouts; CREATE TABLE raw_rollouts (group_id text, "
            "trajectory_id text, reward float8, passed bool, patch text, metrics jsonb, meta jsonb)"
        )
    started = time.perf_counter()
    with connection.cursor() as cursor, path.open() as f:
        copy_sql = ("COPY raw_rollouts (group_id, trajectory_id, reward, passed, patch, metrics, meta)"
                    " FROM STDIN")
        with cursor.cursor.copy(copy_sql) as copy:
            for line in f:
                r = orjson.loads(line)
                copy.write_row((r["group_id"], r["trajectory_id"], r["reward"], r["reward"] >= 1.0,
                                r["patch"], orjson.dumps(r["metrics"]).decode(), "{}"))
    return time.perf_counter() - started


def child_peak_rss(path: Path, database_url: str) -> int:
    """Peak RSS (KiB) of a separate process importing `path` into a new batch."""
    code = (
        "import resource, sys; sys.path.insert(0, sys.argv[1]);"
        "from bench.ingest import setup_django, time_import; setup_django(sys.argv[2]);"
        "from pathlib import Path; time_import(Path(sys.argv[3]), sys.argv[4]);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO), database_url, str(path), f"mem-{path.stem}"],
        check=True, capture_output=True, text=True,
    ).stdout
    return int(out.strip().splitlines()[-1])


def _seconds(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in values) + ")"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    admin_url = os.environ.get("DATABASE_URL", "")
    if not admin_url.startswith("postgres"):
        sys.exit("set DATABASE_URL=postgres://... (the benchmark creates its own database)")
    database_url = fresh_database(admin_url, BENCH_DB)
    setup_django(database_url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with tempfile.TemporaryDirectory() as tmp:
        full, quarter = Path(tmp) / "full.jsonl", Path(tmp) / "quarter.jsonl"
        write_rollouts(full, args.rows)
        write_rollouts(quarter, args.rows // 4)
        size_mb = full.stat().st_size / 1e6
        # Interleaved, each import next to its COPY: this machine's speed drifts by
        # tens of percent within minutes, and the ratio of a pair cancels that out.
        imports, copies = [], []
        for i in range(args.repeat):
            imports.append(time_import(full, f"bench-{i}"))
            copies.append(time_raw_copy(full))
        ours, floor = statistics.median(imports), statistics.median(copies)
        ratios = [c / t for t, c in zip(imports, copies, strict=True)]
        print(f"rows: {args.rows:,} in groups of 16, file {size_mb:.0f} MB")
        print(f"import_rollouts: {ours:.2f} s median of {_seconds(imports)}, "
              f"{args.rows / ours:,.0f} rows/s")
        print(f"raw COPY:        {floor:.2f} s median of {_seconds(copies)}, "
              f"{args.rows / floor:,.0f} rows/s")
        print(f"ratio (import / raw COPY throughput): {statistics.median(ratios):.2f} median of "
              f"the pairs {_seconds(ratios)}  (target >= 0.3)")
        rss_quarter = child_peak_rss(quarter, database_url)
        rss_full = child_peak_rss(full, database_url)
        print(f"peak RSS: {rss_quarter / 1024:.0f} MiB for {args.rows // 4:,} rows, "
              f"{rss_full / 1024:.0f} MiB for {args.rows:,} rows "
              f"(ratio {rss_full / rss_quarter:.2f} for 4x the file)")


if __name__ == "__main__":
    main()
