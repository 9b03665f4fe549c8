"""Real Celery worker processes on the test database, and the brokers they use.

A worker is `celery -A workers worker` in its own process group, pointed at
the database the tests write to (committed rows: tests here use
`django_db(transaction=True)`), so killing it with SIGKILL takes its pool
processes down too, as a lost machine would.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from tests.factories import group, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/0"
SCRIPTED = "tests.workers.graders:ScriptedGrader"


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Worker:
    """One `celery worker` process group; `log` holds its output."""

    def __init__(self, env: dict, log: Path, *, concurrency: int = 2):
        self.env, self.log, self.concurrency = env, log, concurrency
        self.proc = None

    def start(self, timeout: float = 30) -> "Worker":
        offset = self.log.stat().st_size if self.log.exists() else 0
        self._out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "cpu,gpu",
             "-c", str(self.concurrency), "-l", "info", "-n", f"test-{uuid.uuid4().hex[:8]}@%h",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=self.env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.output()}")
            with self.log.open("rb") as f:
                f.seek(offset)
                if b" ready." in f.read():
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready after {timeout} s:\n{self.output()}")

    def kill(self) -> None:
        """SIGKILL the whole process group: the worker and its pool die mid-task."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._out.close()

    def stop(self) -> None:
        """The test is over and nothing in flight matters: a short grace, then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(1)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "GAGAR_GRADING"))}
    env.update(
        DATABASE_URL=database_url(),
        SECRET_KEY=django_settings.SECRET_KEY,
        GAGAR_DATA_DIR=str(django_settings.DATA_DIR),
        LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def redis_broker():
    """A Redis broker with a key prefix of its own and a short visibility timeout.
    Yields the environment a worker needs to use it."""
    prefix = f"gagar-test-{uuid.uuid4().hex[:8]}:"
    overrides = {"CELERY_BROKER_URL": REDIS_URL, "CELERY_REDIS_KEYPREFIX": prefix,
                 "CELERY_VISIBILITY_TIMEOUT": 4}
    from webapp.jobs import configure

    with override_settings(**overrides):
        configure(django_settings)
        yield _env(**overrides)
    configure(django_settings)
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def filesystem_broker(tmp_path):
    """The embedded default: kombu's filesystem transport in a folder of this test's own."""
    from webapp.jobs import configure

    overrides = {"CELERY_BROKER_URL": "filesystem://", "CELERY_BROKER_DIR": tmp_path / "broker"}
    with override_settings(**overrides):
        configure(django_settings)
        yield _env(**overrides)
    configure(django_settings)


@pytest.fixture
def workers(tmp_path):
    """Start workers with `workers(env)`; all are stopped at the end of the test."""
    started = []

    def start(env, *, concurrency=2, log="worker.log"):
        worker = Worker(env, tmp_path / log, concurrency=concurrency).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def make_batch(tmp_path: Path, name: str, n_groups: int):
    """`n_groups` mixed groups (two passing trajectories, one failing) and an all-pass one."""
    from webapp.models import Batch

    records = []
    for i in range(n_groups):
        records += group(f"{name}-{i:04d}", [1, 1, 0])
    records += group(f"{name}-allpass", [1, 1])
    call_command("import_rollouts", str(write_jsonl(tmp_path / f"{name}.jsonl", records)), batch=name,
                 verbosity=0)
    return Batch.objects.get(name=name)


def wait_until(condition, *, timeout: float, every: float = 0.2, tick=None, message=""):
    """Poll `condition()` until true; `tick()` runs between polls (a sweep, say)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if tick:
            tick()
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s: {message}")
