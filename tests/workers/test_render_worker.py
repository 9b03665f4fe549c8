"""The render task through a real worker: an import's patches rendered ahead of the first visit."""

import pytest
from django.urls import reverse

import grading.diffs
from tests.webapp.reviewdata import import_batch, records
from tests.workers.conftest import wait_until
from webapp.html import patches
from webapp.models import Group, PatchRender, Trajectory
from webapp.review import comparison

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_renders_an_imported_batch_and_the_page_then_parses_nothing(
        tmp_path, filesystem_broker, workers, client, researcher, monkeypatch):
    workers(filesystem_broker)
    batch = import_batch(tmp_path, records("task-1") + records("task-2"))  # the task goes out on commit
    digests = {patches.digest(p) for p in Trajectory.objects.filter(batch=batch).values_list("patch", flat=True)}
    wait_until(lambda: PatchRender.objects.count() == len(digests) + 1, timeout=30,  # + the reference patch
               message=f"{PatchRender.objects.count()} of {len(digests) + 1} renders")
    assert set(PatchRender.objects.filter(eager=False).values_list("digest", flat=True)) == digests

    calls = []
    original = grading.diffs.parse_patch
    monkeypatch.setattr(patches, "parse_patch", lambda text: calls.append(text) or original(text))
    monkeypatch.setattr(grading.diffs, "parse_patch", lambda text: calls.append(text) or original(text))
    patches.clear_caches()
    comparison.clear_caches()
    client.force_login(researcher)
    response = client.get(reverse("group", args=[Group.objects.get(batch=batch, group_id="task-2").pk]))
    assert response.status_code == 200 and "pkg/mod.py" in response.content.decode()
    assert calls == []
