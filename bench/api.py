"""One online training step through the API and workers against the same grading in-process.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gagar .venv/bin/python bench/api.py

A step is 64 groups x 16 trajectories (10 passing with patches that differ in quality,
6 failing). In the same run:

- floor: the heuristic grader's `rank_many` over the step's groups, already in memory,
  then the core's `gagar_advantages` on its rankings: what a trainer calling the grader
  itself would pay, with no app, database or broker;
- API: `Client.grade_step` against the app served by `manage.py runserver` (threaded,
  in its own process), with one `celery worker` of 2 processes on the cpu queue and one
  of 1 process at nice 10 on the derived queue (docs/deployment.md), on Redis and
  PostgreSQL, all started beforehand on this machine: from the call to the rewards returned, over
  repeated steps (each step a new batch). Every step's rewards are checked against the
  floor's.

Prints p50/p95 of both, the ratio p95 / floor p50, and the target check
p95 <= 2 x floor + 200 ms. Then where the API's time goes, from the rows' own
timestamps: submit (upload, import, launch), broker (until the first claim),
workers (first claim to last result), answer (until the rewards are back).

Then the same steps again while another step's figures are being computed (issue 26): a
batch of --busy-groups groups of 16 (by default a step's 64), built in bulk as bench/runs.py
builds its big batch, whose figures are requested again before each step once the derived
queue's worker stored them (`batch_figures_stale`, the `run_figures` task), as a trainer's
next step arrives while the last one's figures are computed. --busy-groups 62500 (1M
trajectories, a compute of 10-15 s) keeps that worker recomputing through every step: a
stress beyond the issue's case. The target is checked against the quiet floor.
"""

import argparse
import io
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database  # noqa: E402
from bench.grading import FIX, STRAY, VARIANTS, start_worker  # noqa: E402
from bench.runs import SIZE as BUSY_SIZE  # noqa: E402
from bench.runs import analyze, build_batch  # noqa: E402

BENCH_DB = "gagar_bench_api"
REDIS_URL = "redis://127.0.0.1:6379/0"
GROUPS, SIZE, PASSING = 64, 16, 10


def step_rollouts(step: int) -> list[dict]:
    """One step's rollouts: each group's passing patches differ, so the grader ranks them."""
    records = []
    for g in range(GROUPS):
        for member in range(SIZE):
            body = VARIANTS[member % 3]
            patch = FIX.format(g=g, n=2 + body.count("\n"), body=body)
            if member % 4 == 1:
                patch += STRAY.format(g=g)
            record = {"group_id": f"s{step}-task-{g:03d}", "trajectory_id": f"r{member:02d}",
                      "reward": 1.0 if member < PASSING else 0.0, "patch": patch,
                      "metrics": {"num_turns": 10 + member, "output_tokens": 800 + 50 * member}}
            if member == 0:
                record["task"] = {"id": f"task-{g:03d}", "statement": "Round the subtotal to cents."}
            records.append(record)
    return records


def floor(rollouts: list[dict], config: dict) -> tuple[float, dict]:
    """Seconds to grade `rollouts` in-process and compute their advantages; the rewards."""
    import numpy as np

    from grading.advantages import gagar_advantages
    from grading.cases import GroupCase, TrajectoryCase
    from grading.graders.heuristic import HeuristicGrader
    from grading.rankings import ranks_from_tiers

    started = time.perf_counter()
    members: dict[str, list] = {}
    for r in rollouts:
        members.setdefault(r["group_id"], []).append(
            TrajectoryCase(r["trajectory_id"], r["reward"] >= 1, r["reward"], r["patch"], metrics=r["metrics"]))
    views = [GroupCase(group_id=g, statement="", trajectories=tuple(ts)) for g, ts in members.items()]
    grades = HeuristicGrader().rank_many(views)
    rank_of = {(v.group_id, tid): rank for v, grade in zip(views, grades, strict=True)
               for tid, rank in ranks_from_tiers(grade.tiers).items()}
    order = {g: i for i, g in enumerate(members)}
    result = gagar_advantages(
        np.array([r["reward"] for r in rollouts]), np.array([order[r["group_id"]] for r in rollouts]),
        np.array([r["reward"] >= 1 for r in rollouts]),
        np.array([rank_of.get((r["group_id"], r["trajectory_id"]), 0) for r in rollouts]),
        schedule=config["schedule"], params=config["params"], norm_by_std=config["norm_by_std"],
        unbiased_std=config["unbiased_std"])
    seconds = time.perf_counter() - started
    return seconds, {(r["group_id"], r["trajectory_id"]): a for r, a in zip(rollouts, result.advantages, strict=True)}


def serve(env: dict, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
        cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited:\n{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.2)
    raise SystemExit("the app did not start")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def phases(batch_name: str, started: float, ended: float) -> dict[str, float]:
    """Where one step's time went, in seconds, from the timestamps its rows hold."""
    from django.db.models import Max, Min

    from webapp.models import Batch, GradingRun

    batch = Batch.objects.get(name=batch_name)
    run = GradingRun.objects.get(batch=batch)
    span = run.gradings.aggregate(first=Min("claimed_at"), last=Max("finished_at"))
    launched, first, last = (t.timestamp() for t in (run.created_at, span["first"], span["last"]))
    return {"submit": launched - started, "broker": first - launched, "workers": last - first,
            "answer": ended - last}


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def steps(client, numbers: range, warmup: int, config: dict, before_step=lambda: None) -> dict[str, list]:
    """Grade the steps `numbers` through the API, checking each step's rewards against the floor's;
    the floors, latencies and phases of those after the first `warmup`. `before_step` runs before each."""
    measured = {"floors": [], "latencies": [], "parts": []}
    for i, step in enumerate(numbers):
        before_step()
        rollouts = step_rollouts(step)
        floor_s, expected = floor(rollouts, config)
        started_wall, started = time.time(), time.perf_counter()
        result = client.grade_step(rollouts, run="bench", step=step, deadline=60)
        latency = time.perf_counter() - started
        assert result.fallback == {}, result.fallback
        assert all(abs(result.rewards[k] - v) < 1e-9 for k, v in expected.items())
        if i >= warmup:
            measured["floors"].append(floor_s)
            measured["latencies"].append(latency)
            measured["parts"].append(phases(result.batch, started_wall, started_wall + latency))
    return measured


def figures_state(batch_id: int) -> tuple:
    """(requested_at, seconds of the last compute) of the batch's stored figures; SystemExit if
    their last compute failed."""
    from webapp.models import BatchFigures

    requested, seconds, error = BatchFigures.objects.filter(batch_id=batch_id).values_list(
        "requested_at", "measures__compute_s", "error").get()
    if error:
        raise SystemExit(f"the figures of batch {batch_id} failed: {error}")
    return requested, seconds


class BusyFigures:
    """Keeps the worker recomputing a batch's figures: requested again as soon as stored, as a
    write to the batch would (`batch_figures_stale`); `seconds` holds each finished compute's time."""

    def __init__(self, batch_id: int):
        self.batch_id, self.seconds = batch_id, []

    def start(self) -> None:
        """Request the first compute, wait for it and request the next."""
        from webapp.derived import batch_figures_stale

        batch_figures_stale(self.batch_id)
        while (state := figures_state(self.batch_id))[0] is not None:
            time.sleep(0.2)
        self.seconds.append(state[1])
        batch_figures_stale(self.batch_id)

    def again(self) -> None:
        """Request the next compute if the last one is stored, counting it."""
        from webapp.derived import batch_figures_stale

        requested, seconds = figures_state(self.batch_id)
        if requested is None:
            self.seconds.append(seconds)
            batch_figures_stale(self.batch_id)


def report(measured: dict, quiet_floor: float) -> None:
    """The floor and API percentiles of `measured`, and the target against `quiet_floor` (p50, s)."""
    floors, latencies, parts = measured["floors"], measured["latencies"], measured["parts"]
    p50, p95 = statistics.median(latencies), percentile(latencies, 95)
    target = 2 * quiet_floor + 0.2
    print(f"floor, in-process grader + core:  p50 {1000 * statistics.median(floors):7.1f} ms  "
          f"p95 {1000 * percentile(floors, 95):7.1f} ms")
    print(f"API, grade_step to rewards:       p50 {1000 * p50:7.1f} ms  p95 {1000 * p95:7.1f} ms")
    print(f"ratio p95 / floor: {p95 / quiet_floor:.2f}; target p95 <= 2 x floor + 200 ms = {1000 * target:.0f} ms: "
          f"{'met' if p95 <= target else 'MISSED'}")
    medians = {name: 1000 * statistics.median(p[name] for p in parts) for name in parts[0]}
    print("where the API's time goes (medians): " + ", ".join(f"{k} {v:.0f} ms" for k, v in medians.items()))
    slowest = sorted(zip(latencies, parts, strict=True), key=lambda pair: pair[0])[-2:]
    print("the two slowest steps: " + "; ".join(
        f"{1000 * total:.0f} ms (" + ", ".join(f"{k} {1000 * v:.0f}" for k, v in p.items()) + ")"
        for total, p in reversed(slowest)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--busy-groups", type=int, default=GROUPS,
                        help=f"groups of {BUSY_SIZE} of the batch whose figures are computed meanwhile")
    parser.add_argument("--database", default=BENCH_DB, help="the PostgreSQL database to create afresh")
    parser.add_argument("--redis", default=REDIS_URL, help="the broker")
    args = parser.parse_args()

    admin_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gagar")
    prefix = f"gagar-bench-{uuid.uuid4().hex[:8]}:"
    tmp = Path(tempfile.mkdtemp(prefix="gagar-bench-api-"))
    env = {**os.environ, "DATABASE_URL": fresh_database(admin_url, args.database), "CELERY_BROKER_URL": args.redis,
           "CELERY_REDIS_KEYPREFIX": prefix, "GAGAR_DATA_DIR": str(tmp),
           "SECRET_KEY": os.environ.get("SECRET_KEY", "bench"), "DJANGO_SETTINGS_MODULE": "webapp.settings",
           "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING", "DB_CONN_MAX_AGE": "600"}
    os.environ.update(env)
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from gagar_client import Client

    from webapp.api.services import api_token_create
    from webapp.models import default_advantage_config

    call_command("migrate", verbosity=0)
    call_command("add_user", "bench", role=["researcher"], password=uuid.uuid4().hex, stdout=io.StringIO())
    token = api_token_create(user=get_user_model().objects.get(username="bench"), name="bench")[1]
    port = free_port()
    app = serve(env, port, tmp / "app.log")
    worker = start_worker(env, args.processes, tmp / "worker.log")
    derived = start_worker(env, 1, tmp / "derived.log", queues="derived", nice=10)
    config = default_advantage_config() | {"w_flag": None}
    n = args.warmup + args.steps
    try:
        time.sleep(1)  # let every pool process finish booting
        with Client(f"http://127.0.0.1:{port}", token, timeout=30) as client:
            quiet = steps(client, range(n), args.warmup, config)
            built = time.perf_counter()
            busy_batch = build_batch("busy", args.busy_groups, np.random.default_rng(0))
            analyze()
            built = time.perf_counter() - built
            busy = BusyFigures(busy_batch.pk)
            busy.start()
            loaded = steps(client, range(n, 2 * n), args.warmup, config, before_step=busy.again)
    finally:
        for proc in (worker, derived, app):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        import redis

        broker = redis.Redis.from_url(args.redis)
        for key in broker.scan_iter(f"{prefix}*"):
            broker.delete(key)

    quiet_floor = statistics.median(quiet["floors"])
    print(f"step: {GROUPS} groups x {SIZE} trajectories ({PASSING} passing); {args.steps} steps after "
          f"{args.warmup} warm-up; {args.processes} worker processes on cpu and 1 at nice 10 on derived, Redis, "
          f"PostgreSQL, runserver; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} after the run")
    report(quiet, quiet_floor)
    print(f"\nwhile the derived data's worker recomputes the figures of a batch of {args.busy_groups:,} groups x "
          f"{BUSY_SIZE} "
          f"(built in {built:.0f} s; {len(busy.seconds)} computes finished, the first before the steps, median "
          f"{statistics.median(busy.seconds):.2f} s, the longest {max(busy.seconds):.2f} s), the target against "
          f"the quiet floor:")
    report(loaded, quiet_floor)


if __name__ == "__main__":
    main()
