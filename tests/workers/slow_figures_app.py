"""The workers' app with the figures of batches named "slow..." taking a minute, for the test of
a figures worker killed mid-update: it writes DATA_DIR/figures-started first. Started as
`celery -A tests.workers.slow_figures_app worker`; every other batch is computed as usual."""

import time

import django

from workers import app  # noqa: F401  (celery -A finds it here; the environment names the settings)

django.setup()

from django.conf import settings  # noqa: E402

from webapp.models import Batch  # noqa: E402
from webapp.runs import services  # noqa: E402

STARTED = "figures-started"


def batch_figures(batch_id):
    if Batch.objects.get(pk=batch_id).name.startswith("slow"):
        (settings.DATA_DIR / STARTED).write_text(str(batch_id))
        time.sleep(60)
    return computed(batch_id)


computed, services.batch_figures = services.batch_figures, batch_figures
