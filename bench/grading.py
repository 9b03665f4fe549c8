"""Heuristic grading through Redis and real workers against the same grader in-process.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gagar .venv/bin/python bench/grading.py

Imports N mixed groups (4 trajectories: 3 passing with small patches that
differ in quality, 1 failing) into a fresh PostgreSQL database. Then, in the
same run:

- in-process: the grader's `rank_many` over the same groups, already in
  memory, on one core: the most a core can do, with no database at all;
- queued: `grading_launch` (rows, then messages to Redis) with one
  `celery worker` of P processes already running on this machine, until
  every Grading is done. Timed from the first claim to the last result
  written, as the rows record them: claiming, loading, grading, writing and
  committing each chunk, Celery's delivery of the tasks, and the database and
  Redis on the same cores. The launch before it (the rows, the messages) is
  timed apart and printed, with the run end to end.

Prints groups/s for both and the ratio queued / (P x in-process), the queued
path's throughput per process as a fraction of a core grading in-process,
and the CPU time per group of the worker processes, PostgreSQL and Redis.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database  # noqa: E402

BENCH_DB = "gagar_bench_grading"
REDIS_URL = "redis://127.0.0.1:6379/0"

FIX = ("diff --git a/pkg/m{g}.py b/pkg/m{g}.py\n--- a/pkg/m{g}.py\n+++ b/pkg/m{g}.py\n"
       "@@ -10,3 +10,{n} @@ def total(items):\n     subtotal = sum(items)\n-    return subtotal\n{body}"
       "     # end\n")
VARIANTS = (
    "+    return round(subtotal, 2)\n",
    "+    print('subtotal', subtotal)\n+    return round(subtotal, 2)\n",
    "+    rounded = round(subtotal, 2)\n+    # return subtotal\n+    return rounded\n",
)
STRAY = "diff --git a/repro.py b/repro.py\nnew file mode 100644\n--- /dev/null\n+++ b/repro.py\n@@ -0,0 +1,2 @@\n" \
        "+from pkg.m{g} import total\n+print(total([1.005]))\n"


def write_rollouts(path: Path, n_groups: int) -> None:
    with path.open("w") as f:
        for g in range(n_groups):
            for member in range(4):
                body = VARIANTS[member % 3]
                patch = FIX.format(g=g, n=2 + body.count("\n"), body=body)
                if member == 2 and g % 2:
                    patch += STRAY.format(g=g)
                record = {"group_id": f"task-{g:06d}", "trajectory_id": f"r{member}",
                          "reward": 0.0 if member == 3 else 1.0, "patch": patch,
                          "metrics": {"num_turns": 10 + member, "output_tokens": 800 + 100 * member}}
                if member == 0:
                    record["task"] = {"id": f"task-{g:06d}", "statement": "Round the subtotal to cents."}
                f.write(json.dumps(record) + "\n")


def in_process(batch, repeats: int = 3) -> tuple[float, int]:
    from grading.cases import GroupCase, TrajectoryCase
    from grading.graders.heuristic import HeuristicGrader
    from webapp.models import Group, Trajectory

    groups = {pk: GroupCase(group_id=gid, statement=statement, trajectories=())
              for pk, gid, statement in Group.objects.filter(batch=batch, label=Group.Label.MIXED)
              .values_list("pk", "group_id", "statement")}
    members = {pk: [] for pk in groups}
    for group_pk, tid, passed, reward, patch, metrics in (
            Trajectory.objects.filter(group_id__in=list(groups)).order_by("group_id", "trajectory_id")
            .values_list("group_id", "trajectory_id", "passed", "reward", "patch", "metrics")):
        members[group_pk].append(TrajectoryCase(tid, passed, reward, patch, metrics=metrics))
    views = [GroupCase(group_id=g.group_id, statement=g.statement, trajectories=tuple(members[pk]))
             for pk, g in groups.items()]
    grader = HeuristicGrader()
    best = float("inf")
    for _ in range(repeats):  # the machine is shared: keep the least disturbed run
        started = time.perf_counter()
        grades = grader.rank_many(views)
        best = min(best, time.perf_counter() - started)
        assert all(not isinstance(g, Exception) for g in grades)
    return best, len(views)


def start_worker(env: dict, processes: int, log: Path, *, queues: str = "cpu", nice: int = 0) -> subprocess.Popen:
    """A `celery worker` of `processes` on `queues`, at `nice` (as docs/deployment.md runs them)."""
    out = log.open("wb")
    proc = subprocess.Popen(
        ["nice", "-n", str(nice), sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", queues,
         "-c", str(processes), "-l", "warning", "--without-gossip", "--without-mingle", "--without-heartbeat",
         "-n", f"bench-{queues.replace(',', '-')}@%h"],
        cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"worker exited:\n{log.read_text()}")
        if b"ready" in log.read_bytes() or _pong(env):
            return proc
        time.sleep(0.2)
    raise SystemExit("worker did not start")


def _pong(env) -> bool:
    from webapp.jobs import app

    try:
        return bool(app.control.ping(timeout=0.5))
    except Exception:
        return False


def cpu_seconds(*, pgid: int | None = None, name: str | None = None, pid: int | None = None) -> float:
    """User + system CPU of the live processes in process group `pgid`, named `name`, or `pid`."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            head, _, tail = (entry / "stat").read_text().rpartition(")")
        except OSError:
            continue
        fields = tail.split()  # after the name: state, ppid, pgrp, ...; utime, stime at 11, 12
        if ((pgid is not None and int(fields[2]) == pgid) or (name and head.endswith(f"({name}"))
                or entry.name == str(pid)):
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def queued(batch, processes: int, env: dict, log: Path) -> dict:
    """Grade every group through Redis and `processes` worker processes started beforehand.

    The span timed is from the first claim to the last result written, as the rows record
    them (`claimed_at`, `finished_at`); the launch before it (rows, messages) is timed apart.
    CPU is counted over the whole run: worker processes, the PostgreSQL backends other than
    this script's own (which wrote the launch's rows), Redis."""
    from django.db import connection
    from django.db.models import Count, Max, Min

    from webapp.grading.services import grading_launch
    from webapp.models import Grading

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (own_backend,) = cursor.fetchone()
    worker = start_worker(env, processes, log)
    try:
        time.sleep(1)  # let every pool process finish booting
        meters = {"workers": {"pgid": worker.pid}, "postgres": {"name": "postgres"},
                  "redis": {"name": "redis-server"}, "own backend": {"pid": own_backend}}
        before = {k: cpu_seconds(**m) for k, m in meters.items()}
        started = time.perf_counter()
        launch = grading_launch(batch=batch, grader="heuristic")
        launched = time.perf_counter()
        while Grading.objects.filter(run=launch.run, status__in=["queued", "running"]).exists():
            time.sleep(0.1)  # seldom: the span comes from the rows, and this polling takes CPU from the workers
        end_to_end = time.perf_counter() - started
        cpu = {k: cpu_seconds(**m) - before[k] for k, m in meters.items()}
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)
    counts = dict(launch.run.gradings.values_list("status").annotate(n=Count("id")))
    assert counts == {"done": launch.queued}, counts
    span = launch.run.gradings.aggregate(first=Min("claimed_at"), last=Max("finished_at"))
    cpu["postgres"] -= cpu.pop("own backend")
    return {"n": launch.queued, "span": (span["last"] - span["first"]).total_seconds(),
            "launch": launched - started, "end_to_end": end_to_end, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=100, help="groups per task")
    args = parser.parse_args()

    admin_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gagar")
    prefix = f"gagar-bench-{uuid.uuid4().hex[:8]}:"
    env = {**os.environ, "DATABASE_URL": fresh_database(admin_url, BENCH_DB), "CELERY_BROKER_URL": REDIS_URL,
           "CELERY_REDIS_KEYPREFIX": prefix, "GAGAR_GRADING_CHUNK": str(args.chunk),
           "SECRET_KEY": os.environ.get("SECRET_KEY", "bench"), "DJANGO_SETTINGS_MODULE": "webapp.settings",
           "LOG_LEVEL": "WARNING", "DB_CONN_MAX_AGE": "600"}
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from webapp.models import Batch

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "groups.jsonl"
        write_rollouts(path, args.groups)
        call_command("migrate", verbosity=0)
        call_command("import_rollouts", str(path), batch="bench", verbosity=0)
        batch = Batch.objects.get(name="bench")
        t_local, n_local = in_process(batch)
        run = queued(batch, args.processes, env, Path(tmp) / "worker.log")

    import redis

    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)

    n, p = run["n"], args.processes
    local_rate, queued_rate = n_local / t_local, n / run["span"]
    per_group = {k: 1000 * v / n for k, v in run["cpu"].items()}
    print(f"groups: {n_local} mixed, 4 trajectories each; tasks of {args.chunk} groups; "
          f"{os.cpu_count()} cores on this machine, load average {os.getloadavg()[0]:.1f} after the run")
    print(f"in-process, 1 core:         {t_local:7.2f} s  {local_rate:8.0f} groups/s"
          f"  ({1000 * t_local / n_local:.2f} ms per group): rank_many over groups in memory, best of 3")
    print(f"queued, Redis, {p} processes: {run['span']:7.2f} s  {queued_rate:8.0f} groups/s"
          "  first claim to last result: claim, load, grade, write, commit, Celery's delivery")
    print(f"  not counted above: the launch before it, {run['launch']:.2f} s (rows, then messages); "
          f"end to end with it {run['end_to_end']:.2f} s, {n / run['end_to_end']:.0f} groups/s")
    print(f"  CPU ms per group: workers {per_group['workers']:.2f}, PostgreSQL {per_group['postgres']:.2f} "
          f"(without the launch's COPY), Redis {per_group['redis']:.2f}")
    print(f"ratio queued / ({p} x in-process): {queued_rate / (p * local_rate):.2f} (target >= 0.5)")
    print(f"CPU ratio, in-process / (workers + PostgreSQL + Redis) per group: "
          f"{1000 * t_local / n_local / sum(per_group.values()):.2f}; workers alone: "
          f"{1000 * t_local / n_local / per_group['workers']:.2f}")


if __name__ == "__main__":
    main()
