"""The advantages export to Parquet against pyarrow writing the same table from memory.

    .venv/bin/python bench/export.py                      # SQLite in a temporary folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/export.py

Builds its own database (a fresh `gagar_bench_export` on PostgreSQL) holding
batches of 250k, 500k and 1M trajectories in groups of 16 (70% mixed, 10% all
pass, 20% all fail; every mixed group graded, with ties and a few flags),
inserted in bulk (`--rows` sets the largest). Then, on the largest batch: `write_advantages` to Parquet (read
from the database, rankings, GRPO and redistribution, Arrow tables, writer),
against the floor, `pyarrow.parquet.write_table` of the same rows, already in
memory as one Arrow table, with the same writer options; each timed in pairs,
interleaved. Prints rows/s of both and their ratio (target >= 0.5). Last, the
export runs alone in a child process per batch and its peak RSS is printed, to
show that memory stays flat in batch size (the export streams).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from webapp.rankings import UNRESTRICTED

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database  # noqa: E402

BENCH_DB = "gagar_bench_export"
GROUP_SIZE = 16
INSERT_CHUNK = 50_000


def setup_django() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        os.environ["DATABASE_URL"] = fresh_database(url, BENCH_DB)
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["GAGAR_DATA_DIR"] = tempfile.mkdtemp(prefix="gagar-bench-export-")
    os.environ.setdefault("SECRET_KEY", "bench")
    _django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    import django

    django.setup()


def _template_row(model, **fields) -> dict:
    """Every concrete field of `model` but the pk, as its default, with `fields` set."""
    instance = model(**fields)
    return {f.attname: getattr(instance, f.attname) for f in model._meta.concrete_fields if not f.primary_key}


def build_batch(name: str, n: int, seed: int) -> None:
    """`n` trajectories in groups of GROUP_SIZE, graded as a heuristic grader would leave them."""
    from django.db import connection
    from django.utils import timezone

    from webapp.bulk import insert_rows
    from webapp.models import Batch, Grading, GradingRun, Group, Trajectory

    rng = np.random.default_rng(seed)
    n_groups = n // GROUP_SIZE
    kind = rng.choice(3, size=n_groups, p=[0.7, 0.1, 0.2])  # mixed, all pass, all fail
    pass_rate = np.choose(kind, [rng.uniform(0.1, 0.9, n_groups), 1.0, 0.0])
    passed = rng.random((n_groups, GROUP_SIZE)) < pass_rate[:, None]
    n_pass = passed.sum(axis=1)
    labels = np.where(n_pass == GROUP_SIZE, "all_pass", np.where(n_pass == 0, "all_fail", "mixed"))
    batch = Batch.objects.create(name=name, n_groups=n_groups, n_trajectories=n, n_passed=int(n_pass.sum()))
    group = _template_row(Group, batch_id=batch.pk)
    group_pks = []
    for start in range(0, n_groups, INSERT_CHUNK):
        group_pks += insert_rows(Group, [
            {**group, "group_id": f"repo__task-{i:07d}", "label": labels[i], "n_trajectories": GROUP_SIZE,
             "n_passed": int(n_pass[i]), "pass_rate": float(n_pass[i]) / GROUP_SIZE}
            for i in range(start, min(n_groups, start + INSERT_CHUNK))])
    trajectory = _template_row(Trajectory, batch_id=batch.pk, content_hash="0" * 64)
    per_chunk = INSERT_CHUNK // GROUP_SIZE
    for start in range(0, n_groups, per_chunk):
        insert_rows(Trajectory, [
            {**trajectory, "group_id": group_pks[g], "trajectory_id": f"r{k:02d}", "reward": float(passed[g, k]),
             "passed": bool(passed[g, k])}
            for g in range(start, min(n_groups, start + per_chunk)) for k in range(GROUP_SIZE)])
    now = timezone.now()
    run = GradingRun.objects.create(batch=batch, grader="heuristic", queue="cpu", grader_version="bench-1")
    grading = _template_row(Grading, run_id=run.pk, status="done", attempts=1, queued_at=now, finished_at=now,
                            grader_version="bench-1")
    quality = rng.integers(0, 5, (n_groups, GROUP_SIZE))  # five levels: many ties
    mixed = np.flatnonzero(kind == 0)
    for start in range(0, mixed.size, per_chunk):
        rows = []
        for g in mixed[start:start + per_chunk].tolist():
            ids = [k for k in range(GROUP_SIZE) if passed[g, k]]
            tiers = [[f"r{k:02d}" for k in ids if quality[g, k] == level] for level in range(5)]
            flags = {f"r{k:02d}": ["debug_leftovers"] for k in ids if quality[g, k] == 4}
            rows.append({**grading, "group_id": group_pks[g], "tiers": [t for t in tiers if t], "flags": flags})
        insert_rows(Grading, rows)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does soon after a big import


def export(name: str, path: Path) -> int:
    from webapp.advantages.config import parse_advantage_config
    from webapp.exports.advantages import write_advantages
    from webapp.models import Batch

    batch = Batch.objects.get(name=name)
    config = parse_advantage_config(batch.advantage_config)
    return write_advantages(batch, path, viewer=UNRESTRICTED, format="parquet", config=config)


def write_from_memory(table, path: Path) -> None:
    """The floor: the same rows, already one Arrow table, written with the same options."""
    import pyarrow.parquet as pq

    from webapp.exports.advantages import PARQUET_OPTIONS, ROW_GROUP_ROWS

    pq.write_table(table, path, row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)


def child_peak_rss(name: str, path: Path) -> tuple[int, int]:
    """(RSS before, peak RSS during) the export of batch `name` in a fresh process, in KiB. The
    peak is reset once Django, numpy and pyarrow are loaded (their imports peak higher than
    a small export does), so that it is the export's own."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from bench.export import _django, export, status_kib; _django();"
        "import pyarrow.parquet, webapp.exports.advantages;"
        "open('/proc/self/clear_refs', 'w').write('5');"
        "before = status_kib('VmRSS'); export(sys.argv[2], Path(sys.argv[3]));"
        "print(before, status_kib('VmHWM'))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(REPO), name, str(path)], check=True,
                         capture_output=True, text=True, env=os.environ).stdout
    before, peak = out.split()
    return int(before), int(peak)


def status_kib(key: str) -> int:
    """A memory figure of this process from /proc/self/status (Linux), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise LookupError(key)


def _seconds(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in values) + ")"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="the largest batch; the others 1/4, 1/2")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = (args.rows // 4, args.rows // 2, args.rows)
    setup_django()
    from django.db import connection

    started = time.perf_counter()
    for i, n in enumerate(sizes):
        build_batch(f"bench-{n}", n, seed=i)
    print(f"database: {connection.vendor}; built {sum(sizes):,} trajectories in {time.perf_counter() - started:.0f} s")

    import pyarrow.parquet as pq

    n = sizes[-1]
    with tempfile.TemporaryDirectory() as tmp:
        ours_path, floor_path = Path(tmp) / "export.parquet", Path(tmp) / "floor.parquet"
        export(f"bench-{n}", ours_path)  # warm-up: caches, imports
        table = pq.read_table(ours_path)
        ours, floor = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            rows = export(f"bench-{n}", ours_path)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            write_from_memory(table, floor_path)
            floor.append(time.perf_counter() - start)
        assert rows == n == table.num_rows
        same = ours_path.read_bytes() == floor_path.read_bytes()
        ratios = [f / o for o, f in zip(ours, floor, strict=True)]
        print(f"rows: {n:,} in groups of {GROUP_SIZE}, Parquet {ours_path.stat().st_size / 1e6:.1f} MB "
              f"(the floor's file is {'byte-identical' if same else 'different'})")
        print(f"write_advantages:  {statistics.median(ours):.2f} s median of {_seconds(ours)}, "
              f"{n / statistics.median(ours):,.0f} rows/s")
        print(f"pyarrow in memory: {statistics.median(floor):.2f} s median of {_seconds(floor)}, "
              f"{n / statistics.median(floor):,.0f} rows/s")
        print(f"ratio (export / in-memory write throughput): {statistics.median(ratios):.3f} median of the pairs "
              f"{_seconds(ratios)}  (target >= 0.5)")
        del table
        peaks = []
        for size in sizes:
            before, peak = child_peak_rss(f"bench-{size}", Path(tmp) / f"rss-{size}.parquet")
            peaks.append(peak)
            print(f"peak RSS exporting {size:>9,} rows: {peak / 1024:.0f} MiB "
                  f"(+{(peak - before) / 1024:.0f} MiB over the {before / 1024:.0f} MiB of the loaded process)")
        print(f"peak RSS ratio, {sizes[-1]:,} rows / {sizes[0]:,} rows: {peaks[-1] / peaks[0]:.2f} "
              "(flat: close to 1)")
    print(f"this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
          f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
