"""Re-grading the gold set runs real workers: their fixtures (tests/workers/conftest.py)."""

from tests.workers.conftest import redis_broker, workers  # noqa: F401
