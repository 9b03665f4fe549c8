"""Line numbers beside diff lines (old and new, each right for its line kind) and
the interdiff page: the changes between two trajectories, highlighted and numbered."""

import re

import pytest
from django.urls import reverse

from tests.webapp.reviewdata import import_batch, records
from webapp.models import Group, Trajectory

pytestmark = pytest.mark.django_db

ROW = re.compile(r'<span class="ln (ctx|add|del)[^"]*" data-o="(\d*)" data-n="(\d*)"')


def module_patch(lines: dict[int, str], path="pkg/calc.py") -> str:
    """A patch of a 400-line module whose line n reads `value_n = n`, changing the given lines."""
    out = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
    for n, new in sorted(lines.items()):
        out += f"@@ -{n - 3},7 +{n - 3},7 @@\n"
        out += "".join(f" value_{i} = {i}\n" for i in range(n - 3, n))
        out += f"-value_{n} = {n}\n+{new}\n"
        out += "".join(f" value_{i} = {i}\n" for i in range(n + 1, n + 4))
    return out


GUTTER_PATCH = ("diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n"
                "@@ -173,7 +177,8 @@ def total():\n"
                "     a = 1\n     b = 2\n     c = 3\n-    return a\n+    d = 4\n+    return a + d\n"
                "     # end\n     x = 0\n     y = 0\n")


def rows(html: str) -> list[tuple[str, int | None, int | None]]:
    return [(kind, int(o) if o else None, int(n) if n else None) for kind, o, n in ROW.findall(html)]


def test_the_matrix_numbers_old_and_new_lines_by_kind(client, researcher, tmp_path):
    recs = records("gutter")
    recs[0]["patch"] = GUTTER_PATCH
    import_batch(tmp_path, recs, name="gutter")
    client.force_login(researcher)

    html = client.get(reverse("group", args=[Group.objects.get(group_id="gutter").pk])).content.decode()

    cell = html[html.index("def total():"):]
    assert rows(cell)[:9] == [
        ("ctx", 173, 177), ("ctx", 174, 178), ("ctx", 175, 179), ("del", 176, None), ("add", None, 180),
        ("add", None, 181), ("ctx", 177, 182), ("ctx", 178, 183), ("ctx", 179, 184)]


@pytest.fixture
def pair(tmp_path):
    recs = records("idf")
    recs[0]["patch"] = module_patch({20: "value_20 = 20  # fixed by A"})
    recs[1]["patch"] = module_patch({310: "value_310 = -310  # fixed by B"})
    import_batch(tmp_path, recs, name="idf")
    group = Group.objects.get(group_id="idf")
    a, b = (Trajectory.objects.get(group=group, trajectory_id=tid) for tid in ("t1", "t2"))
    return group, a, b


def test_the_interdiff_shows_only_the_changes_numbered_and_highlighted(client, researcher, pair):
    group, a, b = pair
    client.force_login(researcher)

    html = client.get(reverse("interdiff", args=[group.pk]), {"a": a.pk, "b": b.pk}).content.decode()

    assert '<span class="hh">@@ -17,7 +17,7 @@</span>' in html and '<span class="hh">@@ -307,7 +307,7 @@</span>' in html
    changed = [row for row in rows(html) if row[0] != "ctx"]
    assert changed == [("del", 20, None), ("add", None, 20), ("del", 310, None), ("add", None, 310)]
    # Pygments, as in the matrix, and the comment A added marked as what changed in the line
    assert '<span class="c1"><mark># fixed by A</mark></span>' in html
    assert "-@@" not in html and "+@@" not in html


def test_patches_that_cannot_be_reconciled_say_so(client, researcher, tmp_path):
    recs = records("idf-conflict")
    recs[0]["patch"] = module_patch({20: "value_20 = 20  # fixed by A"})
    other_base = module_patch({21: "value_21 = 0"}).replace(" value_20 = 20\n", " value_20 = 'elsewhere'\n")
    recs[1]["patch"] = other_base
    import_batch(tmp_path, recs, name="idf-conflict")
    group = Group.objects.get(group_id="idf-conflict")
    a, b = (Trajectory.objects.get(group=group, trajectory_id=tid) for tid in ("t1", "t2"))
    client.force_login(researcher)

    response = client.get(reverse("interdiff", args=[group.pk]), {"a": a.pk, "b": b.pk})

    assert response.status_code == 200
    html = response.content.decode()
    assert "cannot be compared" in html
    assert "the patches were not made against the same file: line 20 of the original reads differently" in html


def test_the_interdiff_preselects_two_trajectories_whose_changes_differ(client, researcher, tmp_path):
    # t1 and t2 make the same change: preselected together, the interdiff showed nothing.
    import_batch(tmp_path, records("same-first"), name="same-first")
    group = Group.objects.get(group_id="same-first")
    client.force_login(researcher)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    form = html[html.index('id="interdiff-form"'):html.index("</form>", html.index('id="interdiff-form"'))]
    chosen = re.findall(r'<option value="(\d+)" selected>', form)
    a, b = (Trajectory.objects.get(pk=pk) for pk in chosen)
    assert a.passed and b.passed and a.patch != b.patch, (a.trajectory_id, b.trajectory_id)
