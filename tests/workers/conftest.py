"""Real Celery worker processes on the test database, and the brokers they use.

A worker is `celery -A workers worker` in its own process group, pointed at
the database the tests write to (committed rows: tests here use
`django_db(transaction=True)`), so killing it with SIGKILL takes its pool
processes down too, as a lost machine would.
"""

import os
import signal
import socket
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
    """One `celery worker` process group of the Celery app in the module `app`; `log` holds its output."""

    ready = b" ready."

    def __init__(self, env: dict, log: Path, *, concurrency: int = 2, app: str = "workers",
                 queues: str = "cpu,gpu,derived"):
        self.env, self.log, self.concurrency, self.app, self.queues = env, log, concurrency, app, queues
        self.proc = None

    def command(self) -> list[str]:
        return ["worker", "-Q", self.queues, "-c", str(self.concurrency), "-l", "info",
                "-n", f"test-{uuid.uuid4().hex[:8]}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"]

    def start(self, timeout: float = 30) -> "Worker":
        offset = self.log.stat().st_size if self.log.exists() else 0
        self._out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", self.app, *self.command()],
            cwd=ROOT, env=self.env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.command()[0]} exited with {self.proc.returncode}:\n{self.output()}")
            with self.log.open("rb") as f:
                f.seek(offset)
                if self.ready in f.read():
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.command()[0]} not ready after {timeout} s:\n{self.output()}")

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


class Beat(Worker):
    """`celery beat`: the periodic sweep, on its schedule from the settings in `env`."""

    ready = b"beat: Starting..."

    def command(self) -> list[str]:
        return ["beat", "-l", "info", "-s", str(self.log.with_suffix(".schedule"))]


class RedisServer:
    """A redis-server of a test's own on a free port, to stop and start again: the shared
    one on 6379 serves every other test (and other test runs) and is never stopped."""

    def __init__(self, folder: Path):
        self.folder = folder
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def start(self) -> None:
        # No persistence: a restart loses every message, the worst a broker outage can do.
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port)
        wait_until(lambda: self._pings(client), timeout=10, every=0.05, message="redis-server did not start")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    @staticmethod
    def _pings(client) -> bool:
        try:
            return client.ping()
        except redis.ConnectionError:
            return False


@pytest.fixture
def redis_server(tmp_path):
    """A running redis-server of this test's own (see RedisServer); stopped at the end."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    if server.proc.poll() is None:
        server.stop()


@pytest.fixture
def own_broker(redis_server):
    """The app and workers on `redis_server` with the default settings (visibility timeout
    included). Yields the environment a worker needs to use it."""
    from webapp.jobs import configure

    with override_settings(CELERY_BROKER_URL=redis_server.url):
        configure(django_settings)
        yield _env(CELERY_BROKER_URL=redis_server.url)
    configure(django_settings)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "GAGAR_GRADING", "GAGAR_SWEEP"))}
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
    """Start workers with `workers(env)` (`beat=True`: celery beat; `app`: the module of another
    Celery app); all are stopped at the end of the test."""
    started = []

    def start(env, *, concurrency=2, log="worker.log", beat=False, app="workers", queues="cpu,gpu,derived"):
        worker = (Beat if beat else Worker)(env, tmp_path / log, concurrency=concurrency, app=app,
                                            queues=queues).start()
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


# A wait's timeout is how long a test gives up after, never a claim about speed (bench/ measures
# that): on a two-core machine running every suite at once, work takes several times as long.
WAIT_SCALE = 4


def wait_until(condition, *, timeout: float, every: float = 0.2, tick=None, message=""):
    """Poll `condition()` until true, giving up after WAIT_SCALE x `timeout` seconds; `tick()`
    runs between polls (a sweep, say)."""
    timeout *= WAIT_SCALE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if tick:
            tick()
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s: {message}")


# --- execution evidence through workers -------------------------------------------------

@pytest.fixture
def codebase_store(tmp_path):
    """The codebase store of tests/evidencedata.py's calc codebase."""
    from tests import evidencedata

    root = evidencedata.store(tmp_path / "store")
    # The same codebase, each test run a second slower: a pass long enough to kill midway.
    evidencedata.write(root / "slow", {**evidencedata.CODEBASE, "tests/conftest.py": "import time\ntime.sleep(1)\n"})
    return root


@pytest.fixture
def evidence_env(filesystem_broker, codebase_store, sandbox_python):
    """The settings and the worker's environment with evidence on."""
    extra = {"GAGAR_CODEBASES": str(codebase_store), "GAGAR_SANDBOX_PATHS": str(sandbox_python.parents[2]),
             "GAGAR_EVIDENCE_LEASE": "3", "GAGAR_EVIDENCE_HEARTBEAT": "0.5"}
    with override_settings(GAGAR_CODEBASES=str(codebase_store), GAGAR_SANDBOX_PATHS=[str(sandbox_python.parents[2])],
                           GAGAR_EVIDENCE_LEASE=3.0):
        yield {**filesystem_broker, **extra}


def import_batch(tmp_path, sandbox_python, name, records):
    """Import `records` as the batch `name` (an evidence test's groups, `sandbox_python` theirs)."""
    from webapp.models import Batch

    call_command("import_rollouts", str(write_jsonl(tmp_path / f"{name}.jsonl", records)), batch=name, verbosity=0)
    return Batch.objects.get(name=name)
