"""Import throughput into PostgreSQL against a raw COPY of the same rows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gagar .venv/bin/python bench/ingest.py

Writes N trajectories (2 KB patches, groups of 16) to a .jsonl file, imports
it with `import_rollouts` into a fresh database, then COPYs the same parsed
rows into a plain unindexed table in the same database: the floor. Prints
rows/s for both and their ratio. Then runs the import in child processes on
files of 1/4 and the full size and prints each one's peak RSS, to show that
memory stays flat in file size (the import streams).

Then one row per format of `import_rollouts --from`: the same rollouts written as
SWE-bench predictions + run reports, SWE-agent .traj run folders + reports, OpenHands
output.jsonl + reports, and verl dumps, each read through its adapter and the validator
(grading.formats, no database) against the JSONL reader on the same rollouts, in the
same run: trajectories/s and the ratio (target >= 0.5).
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


def write_formats(folder: Path, n: int, group_size: int = 16) -> dict[str, tuple[str, dict]]:
    """The rollouts `write_rollouts` makes (the same patches and rewards), in each format
    of `import_rollouts --from`: format -> (the jsonl it is compared with, batch_import's
    paths/reports arguments). Runs are trajectories r0..r15; verl groups by its input."""
    reference = folder / "reference.jsonl"
    write_rollouts(reference, n, group_size)
    records = [orjson.loads(line) for line in reference.open("rb")]
    runs: dict[str, list[dict]] = {}
    for r in records:
        runs.setdefault(r["trajectory_id"], []).append(r)
    inputs: dict[str, dict] = {"swebench": {}, "swe-agent": {}, "openhands": {}}
    for kind in inputs:
        inputs[kind] = {"paths": [], "reports": []}
    for run, rows in runs.items():
        report = {"resolved_ids": [r["group_id"] for r in rows if r["reward"] >= 1],
                  "unresolved_ids": [r["group_id"] for r in rows if r["reward"] < 1]}
        run_dir, traj_dir = folder / run, folder / "trajs" / run  # a SWE-agent run is named by its folder
        run_dir.mkdir()
        traj_dir.mkdir(parents=True)
        (run_dir / "report.json").write_bytes(orjson.dumps(report))
        with (run_dir / "all_preds.jsonl").open("wb") as f:
            for r in rows:
                f.write(orjson.dumps({"instance_id": r["group_id"], "model_name_or_path": run,
                                      "model_patch": r["patch"]}) + b"\n")
        with (run_dir / "output.jsonl").open("wb") as f:
            for r in rows:
                f.write(orjson.dumps({"instance_id": r["group_id"], "test_result": {"git_patch": r["patch"]},
                                      "history": [], "metrics": {"accumulated_cost": 0.1}}) + b"\n")
        for r in rows:
            (traj_dir / f"{r['group_id']}.traj").write_bytes(orjson.dumps(
                {"trajectory": [], "history": [], "info": {"submission": r["patch"], "exit_status": "submitted",
                                            "model_stats": {"api_calls": r["metrics"]["num_turns"]}}}))
        for kind, path in (("swebench", run_dir / "all_preds.jsonl"), ("swe-agent", traj_dir),
                           ("openhands", run_dir / "output.jsonl")):
            inputs[kind]["paths"].append(str(path))
            inputs[kind]["reports"].append(str(run_dir / "report.json"))
    verl = folder / "7.jsonl"
    with verl.open("wb") as f:
        for r in records:
            f.write(orjson.dumps({"input": r["group_id"], "output": r["patch"], "score": r["reward"],
                                  "step": 7}) + b"\n")
    inputs["verl"] = {"paths": [str(verl)], "reports": []}
    return {kind: (str(reference), args) for kind, args in inputs.items()}


def time_read(file_format: str, paths: list[str], reports: list[str]) -> tuple[float, int]:
    """Seconds to read and validate every rollout of these files, and how many."""
    from grading.formats import ImportNotes, Inputs, read_rollouts_from
    from grading.jsonl import ErrorLog

    errors = ErrorLog()
    started = time.perf_counter()
    count = sum(1 for _ in read_rollouts_from(file_format, Inputs(paths=paths, reports=reports),
                                              errors=errors, notes=ImportNotes(), pass_threshold=1.0))
    seconds = time.perf_counter() - started
    if errors:
        sys.exit(f"{file_format}: {errors.summary()}")
    return seconds, count


def as_jsonl(file_format: str, args: dict, path: Path) -> str:
    """The rollouts the adapter reads from these files, written as JSONL: the same rollouts
    (the same content hashes) through the JSONL path."""
    from grading.formats import ImportNotes, Inputs, read_rollouts_from
    from grading.jsonl import ErrorLog
    from grading.rollouts import content_of

    rollouts = read_rollouts_from(file_format, Inputs(paths=args["paths"], reports=args["reports"]),
                                  errors=ErrorLog(), notes=ImportNotes(), pass_threshold=1.0)
    with path.open("wb") as f:
        for rollout in rollouts:
            record = {key: value for key, value in content_of(rollout).items() if value is not None}
            f.write(orjson.dumps(record) + b"\n")
    return str(path)


def format_rows(rows: int, repeat: int) -> None:
    """Trajectories/s through each format's adapter against the JSONL reader on the same
    rollouts (written back as JSONL), interleaved."""
    with tempfile.TemporaryDirectory() as tmp:
        formats = write_formats(Path(tmp), rows)
        print(f"formats: {rows:,} trajectories each, read and validated (no database)")
        for kind, (_, args) in formats.items():
            reference = as_jsonl(kind, args, Path(tmp) / f"{kind}.jsonl")
            ratios, rates = [], []
            for _ in range(repeat):
                jsonl_s, jsonl_n = time_read("jsonl", [reference], [])
                kind_s, kind_n = time_read(kind, args["paths"], args["reports"])
                assert kind_n == jsonl_n == rows, (kind, kind_n, jsonl_n)
                ratios.append(jsonl_s / kind_s)
                rates.append((rows / kind_s, rows / jsonl_s))
            ours, jsonl = statistics.median(r[0] for r in rates), statistics.median(r[1] for r in rates)
            print(f"  {kind:10} {ours:>9,.0f} trajectories/s, jsonl {jsonl:>9,.0f}/s, ratio "
                  f"{statistics.median(ratios):.2f} median of {_seconds(ratios)}  (target >= 0.5)")


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
    parser.add_argument("--formats-only", action="store_true",
                        help="only the per-format rows (they need no database)")
    args = parser.parse_args()
    if args.formats_only:
        format_rows(args.rows // 10, args.repeat)
        return
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
    format_rows(args.rows // 10, args.repeat)


if __name__ == "__main__":
    main()
