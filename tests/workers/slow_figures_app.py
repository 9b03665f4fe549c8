"""The workers' app with the figures of batches named "slow..." taking a minute, for the test of
a figures worker killed mid-update: it writes DATA_DIR/figures-started first. Started as
`celery -A tests.workers.slow_figures_app worker`; every other batch is computed as usual."""

import time

import django

from workers import app  # noqa: F401  (celery -A finds it here; the environment names the settings)

django.setup()

from django.conf import settings  # noqa: E402

from webapp.runs.figures import RunFigures  # noqa: E402

STARTED = "figures-started"


def slow_start(self, batch, config):
    if batch.name.startswith("slow"):
        (settings.DATA_DIR / STARTED).write_text(str(batch.pk))
        time.sleep(60)
    start(self, batch, config)


start, RunFigures.__init__ = RunFigures.__init__, slow_start
