"""The Celery workers: `celery -A workers worker` finds `app` here.

The app, its queues and task names live in `webapp.jobs` (the web app sends
by name); this package only registers the task functions (`workers.tasks`).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

from webapp.jobs import app  # noqa: E402  (needs the variable above)

__all__ = ["app"]
