"""The workers' app with the batches named "huge-..." out of memory, for the failure isolation
tests: loading a huge batch's groups to grade them, rendering its patches and computing its
audit figures raise a MemoryError, as numpy's did on a (337, 50000, 50000) array. Started as
`celery -A tests.workers.memory_app worker`; every other batch is worked on as usual."""

import django

from workers import app  # noqa: F401  (celery -A finds it here; the environment names the settings)

django.setup()

from webapp.audit import figures  # noqa: E402
from webapp.grading import worker  # noqa: E402
from webapp.html import renders  # noqa: E402
from webapp.models import Batch, Group  # noqa: E402

TOO_BIG = "Unable to allocate 6.13 TiB for an array with shape (337, 50000, 50000) and data type int64"


def huge(name: str) -> bool:
    return name.startswith("huge")


def _cases(claims, token, **kwargs):
    if any(huge(Group.objects.get(pk=c.group_pk).batch.name) for c in claims):
        raise MemoryError(TOO_BIG)
    return cases(claims, token, **kwargs)


def _patches(batch_id):
    if huge(Batch.objects.get(pk=batch_id).name):
        raise MemoryError(TOO_BIG)
    return patches(batch_id)


def grading_figures(batch, versions):
    if batch is not None and huge(batch.name):
        raise MemoryError(TOO_BIG)
    return measured(batch, versions)


cases, patches, measured = worker._cases, renders._patches, figures.grading_figures
worker._cases, renders._patches, figures.grading_figures = _cases, _patches, grading_figures
