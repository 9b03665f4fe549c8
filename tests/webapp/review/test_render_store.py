"""The render store: a group page served in a fresh web process from stored renders
with no parse, the same page either way, a new renderer version rendering again, and
renders going once no batch holds their patch."""

import re

import pytest
from django.urls import reverse

import grading.diffs
from tests.webapp.reviewdata import CLEAN, STRAY, file_patch, import_batch, records
from webapp.html import patches, renders
from webapp.models import Batch, BatchPatch, Group, PatchRender, Trajectory
from webapp.review import comparison

pytestmark = pytest.mark.django_db


def fresh_process():
    """What a web process that never served a page holds in memory: nothing."""
    patches.clear_caches()
    comparison.clear_caches()


@pytest.fixture
def parses(monkeypatch):
    """Counts the patches parsed from here on, by any path to the parser."""
    calls = []
    original = grading.diffs.parse_patch

    def counting(text):
        calls.append(text)
        return original(text)

    monkeypatch.setattr(patches, "parse_patch", counting)
    monkeypatch.setattr(grading.diffs, "parse_patch", counting)
    return calls


def page(client, group) -> str:
    response = client.get(reverse("group", args=[group.pk]))
    assert response.status_code == 200
    # the CSRF token is masked afresh for every response
    return re.sub(r'(csrfmiddlewaretoken" value=|X-CSRFToken": )"[^"]+"', "", response.content.decode())


def digests(batch) -> set[str]:
    return {patches.digest(p) for p in Trajectory.objects.filter(batch=batch).values_list("patch", flat=True)}


def test_a_fresh_web_process_serves_the_page_from_stored_renders_without_parsing(client, researcher, tmp_path,
                                                                                 parses):
    batch = import_batch(tmp_path, records("task-1"))
    group = Group.objects.get(group_id="task-1")
    client.force_login(researcher)
    fresh_process()
    first = page(client, group)  # nothing stored yet: rendered here, and stored
    assert parses
    stored = PatchRender.objects.filter(version=patches.RENDERER_VERSION)
    assert set(stored.filter(eager=False).values_list("digest", flat=True)) == digests(batch)
    assert stored.filter(eager=True).count() == 1  # the reference patch, every hunk shown

    fresh_process()
    parses.clear()
    second = page(client, group)
    assert parses == []
    assert second == first
    assert "Same as" in second and "Identical to" in second  # equivalence classes, from the stored keys


def test_load_the_rest_and_the_interdiff_work_from_a_stored_view(client, researcher, tmp_path):
    long = file_patch("pkg/long.py", [f"value_{i} = {i}" for i in range(patches.FILE_LINES + 50)], new=True)
    recs = records("big")
    recs[0]["patch"] = long
    import_batch(tmp_path, recs)
    group = Group.objects.get(group_id="big")
    t1, t2 = (Trajectory.objects.get(group=group, trajectory_id=tid).pk for tid in ("t1", "t2"))
    client.force_login(researcher)
    page(client, group)
    fresh_process()

    rows = client.get(reverse("patch_file", args=[t1]), {"path": "pkg/long.py", "start": 301})
    assert rows.status_code == 200 and "value_349 = " in rows.content.decode().replace('<span class="o">=</span>', "=")
    interdiff = client.get(reverse("interdiff", args=[group.pk]), {"a": t1, "b": t2})
    assert interdiff.status_code == 200 and "pkg/long.py" in interdiff.content.decode()


def test_a_view_from_the_store_is_the_view_rendered_fresh():
    broken = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n"
    huge = file_patch("pkg/huge.py", [f"line {i}" for i in range(3000)], new=True)
    twice = CLEAN + CLEAN.replace("return x + 1", "return x + 2")  # one path twice: the first is shown
    for text in (CLEAN, STRAY, broken, huge, twice, "", "not a patch \udce9"):
        for lazy in (True, False):
            fresh = patches.render_patch(text, "k", lazy)
            stored = renders.render_from_payload(text, "k", renders.render_payload(fresh))
            assert (stored.parsed, stored.change, stored.size, stored.error) == (
                fresh.parsed, fresh.change, fresh.size, fresh.error)
            assert stored.files == fresh.files
            assert all(stored.file_diff(path) == fresh.file_diff(path) for path in fresh.files)


def test_a_new_renderer_version_renders_again_and_the_sweep_drops_the_old_renders(client, researcher, tmp_path,
                                                                                  parses, monkeypatch):
    import_batch(tmp_path, records("task-1"))
    group = Group.objects.get(group_id="task-1")
    client.force_login(researcher)
    page(client, group)
    old = patches.RENDERER_VERSION
    monkeypatch.setattr(renders, "RENDERER_VERSION", old + 1)
    fresh_process()
    parses.clear()

    page(client, group)
    assert parses  # the stored renders are of the old version: not used
    n_new = PatchRender.objects.filter(version=old + 1).count()
    assert n_new == PatchRender.objects.filter(version=old).count() > 0
    assert renders.renders_sweep() == n_new
    assert set(PatchRender.objects.values_list("version", flat=True)) == {old + 1}


def test_the_worker_function_renders_a_batch_once(tmp_path):
    batch = import_batch(tmp_path, records("task-1") + records("task-2"))
    n = len(digests(batch)) + 1  # and the one reference patch both groups share
    assert renders.batch_render(batch.pk) == n
    assert renders.batch_render(batch.pk) == 0
    assert PatchRender.objects.count() == n
    assert set(BatchPatch.objects.filter(batch=batch).values_list("digest", flat=True)) == (
        digests(batch) | {patches.digest(CLEAN)})


def test_deleting_a_batch_leaves_its_renders_to_the_sweep_unless_another_batch_holds_them(tmp_path):
    shared, own = records("task-1"), records("task-2")
    own[0]["patch"] = file_patch("pkg/only_a.py", ["x = 1"], new=True)
    a = import_batch(tmp_path, shared + own, name="a")
    b = import_batch(tmp_path, records("task-1"), name="b")
    renders.batch_render(a.pk)
    renders.batch_render(b.pk)
    only_a = patches.digest(own[0]["patch"])
    assert PatchRender.objects.filter(digest=only_a).exists()
    assert renders.renders_sweep() == 0

    Batch.objects.get(pk=a.pk).delete()
    assert renders.renders_sweep() == 1
    assert set(PatchRender.objects.filter(eager=False).values_list("digest", flat=True)) == digests(b)

    Batch.objects.get(pk=b.pk).delete()
    renders.renders_sweep()
    assert not PatchRender.objects.exists()
