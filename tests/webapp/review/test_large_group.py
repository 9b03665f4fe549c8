"""A group of more trajectories than a page shows (up to 50,000): the matrix shows a page of
columns in the default order with a pager, the page reads and renders only those, a table
lists every trajectory a page at a time, and the interdiff loads the two it compares."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import group as group_records
from tests.webapp.annotationdata import grade, pk_of, set_policy
from tests.webapp.reviewdata import import_batch
from webapp.html import patches
from webapp.models import Group, Trajectory
from webapp.review import columns as layout
from webapp.review import comparison
from webapp.review.summary import ROWS_PER_PAGE

pytestmark = pytest.mark.django_db

N = 250  # past MAX_COLUMNS: paged; 3 pages of the table


def patch(i: int) -> str:
    return (f"diff --git a/pkg/m{i % 7}.py b/pkg/m{i % 7}.py\n--- a/pkg/m{i % 7}.py\n+++ b/pkg/m{i % 7}.py\n"
            f"@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x + {i % 11}\n")


@pytest.fixture
def large(tmp_path):
    records = group_records("big", [float(i % 3 != 0) for i in range(N)])
    for i, record in enumerate(records):
        record["trajectory_id"] = f"t{i:04d}"
        record["patch"] = patch(i)
    return Group.objects.get(batch=import_batch(tmp_path, records, name="big"), group_id="big")


def passing(group):
    return list(group.trajectories.filter(passed=True).order_by("trajectory_id").values_list("trajectory_id",
                                                                                             flat=True))


def ranked(group):
    """The grader ranks the passing ones in reverse id order, one per tier."""
    grade(group, [[tid] for tid in reversed(passing(group))], flags={}, rationales={})


def page(client, user, group, **params):
    client.force_login(user)
    response = client.get(reverse("group", args=[group.pk]), params)
    assert response.status_code == 200
    return response


def tids(response, name="columns"):
    return [c.tid for c in response.context[name]]


def test_a_group_up_to_the_limit_shows_every_trajectory(client, researcher, tmp_path):
    records = group_records("small", [1.0] * layout.MAX_COLUMNS)
    group = Group.objects.get(batch=import_batch(tmp_path, records, name="small"), group_id="small")
    response = page(client, researcher, group)
    assert not response.context["paged"] and len(response.context["columns"]) == layout.MAX_COLUMNS
    assert "review/_summary.html" not in [t.name for t in response.templates]


def test_a_large_group_shows_a_page_of_columns_in_rank_order(client, researcher, large):
    ranked(large)
    best = list(reversed(passing(large)))
    first = page(client, researcher, large)
    assert first.context["paged"] and tids(first) == best[:layout.COLUMNS_PER_PAGE]
    window = first.context["window"]
    assert (window.start, window.stop, window.n_rest, window.previous, window.next) == (
        0, layout.COLUMNS_PER_PAGE, N, None, layout.COLUMNS_PER_PAGE)
    html = first.content.decode()
    assert f"16 of {N}" in html and "Next 16" in html and 'id="ranking-paged"' in html
    assert 'id="rk-list"' not in html  # no editor over a page of the group

    nxt = page(client, researcher, large, cols=str(window.next))
    assert tids(nxt) == best[layout.COLUMNS_PER_PAGE:2 * layout.COLUMNS_PER_PAGE]
    assert nxt.context["window"].previous == 0
    last = page(client, researcher, large, cols="99999")  # past the end: the last page
    assert tids(last)[-1] == max(t for t in (f"t{i:04d}" for i in range(N)) if int(t[1:]) % 3 == 0)


def test_the_header_counts_every_trajectory_of_a_large_group(client, researcher, large):
    html = page(client, researcher, large, hide=pk_of(large, "t0001")).content.decode()
    n_passing = len(passing(large))
    assert re.search(rf"</span>\s*{n_passing} of {N} pass\s", html)  # not "of 16": the columns shown


def test_pinned_columns_come_first_on_every_page_and_hidden_ones_on_none(client, researcher, large):
    ranked(large)
    best = list(reversed(passing(large)))
    pin, hide = pk_of(large, best[40]), pk_of(large, best[1])
    response = page(client, researcher, large, pin=str(pin), hide=str(hide), cols="16")
    shown = tids(response)
    assert shown[0] == best[40] and best[1] not in shown
    assert shown[1:] == [t for t in best if t not in (best[40], best[1])][16:32]
    assert response.context["window"].n_rest == N - 2
    fields = response.context["hidden_fields"]  # the picker lists this page: the rest of the layout rides along
    assert ("hide", str(hide)) in fields and ("cols", "16") in fields


def test_the_page_reads_and_renders_only_the_columns_it_shows(client, researcher, large, monkeypatch):
    ranked(large)
    patches.clear_caches()
    comparison.clear_caches()
    loaded = []
    real = comparison.load_views

    def load_views(trajectories):
        loaded.append(len(trajectories))
        return real(trajectories)

    monkeypatch.setattr(comparison, "load_views", load_views)
    client.force_login(researcher)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("group", args=[large.pk])).status_code == 200
    assert loaded == [layout.COLUMNS_PER_PAGE]
    patch_reads = [q["sql"] for q in queries.captured_queries if re.search(r'"patch"', q["sql"])
                   and "LENGTH" not in q["sql"].upper()]
    assert all("IN (" in sql for sql in patch_reads), patch_reads  # never the whole group's patches


def test_the_table_lists_every_trajectory_a_page_at_a_time(client, researcher, large):
    ranked(large)
    best = list(reversed(passing(large)))
    first = page(client, researcher, large)
    summary = first.context["summary"]
    assert (summary.start, summary.stop, summary.total) == (0, ROWS_PER_PAGE, N)
    rows = summary.rows
    assert [r.member.trajectory_id for r in rows[:3]] == best[:3] and rows[0].advantage["rank"] == 1
    assert rows[0].shown and not rows[layout.COLUMNS_PER_PAGE].shown
    links = first.context["summary_links"][rows[40].member.pk]
    assert "cols=32" in links["show"] and f"pin={rows[40].member.pk}" in links["pin"]
    last = page(client, researcher, large, rows=str(2 * ROWS_PER_PAGE))
    assert last.context["summary"].stop == N and last.context["summary"].next is None
    failing = [r for r in last.context["summary"].rows if not r.member.passed]
    assert failing and all(r.advantage["rank"] is None for r in failing)


def test_a_blind_annotator_gets_no_rank_from_the_table(client, annotator, large):
    set_policy(large.batch, blind=True)
    ranked(large)
    response = page(client, annotator, large)
    assert all(r.advantage["rank"] is None for r in response.context["summary"].rows)
    assert response.context["order_note"].startswith("Columns: passing, then failing, by id")


def test_the_interdiff_of_a_large_group_reads_the_two_it_compares(client, researcher, large):
    a, b = pk_of(large, "t0001"), pk_of(large, "t0002")
    client.force_login(researcher)
    response = client.get(reverse("interdiff", args=[large.pk]), {"a": a, "b": b})
    assert response.status_code == 200 and len(response.context["trajectories"]) == 2
    other = Trajectory.objects.exclude(group=large).first()
    assert other is None or client.get(reverse("interdiff", args=[large.pk]),
                                       {"a": a, "b": other.pk}).status_code == 404
    assert client.get(reverse("interdiff", args=[large.pk]), {"a": a, "b": str(2**70)}).status_code == 404
