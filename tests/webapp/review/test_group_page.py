"""The group page: columns, file matrix, markers, equivalence, interdiff, big patches."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.webapp.reviewdata import file_patch, import_batch, records
from webapp.html import patches
from webapp.models import Group, Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(tmp_path):
    import_batch(tmp_path, records() + records("task-2") + records("task-3"))
    return Group.objects.get(group_id="task-2")


@pytest.fixture
def page(client, researcher, group):
    client.force_login(researcher)
    response = client.get(reverse("group", args=[group.pk]))
    assert response.status_code == 200
    return response


def _tid_pk(group, tid):
    return Trajectory.objects.get(group=group, trajectory_id=tid).pk


def test_it_shows_one_column_per_trajectory_with_outcome_and_metrics(page):
    columns = page.context["columns"]
    assert [c.tid for c in columns] == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert [c.passed for c in columns] == [True] * 5 + [False]
    assert (columns[0].turns, columns[0].tokens, columns[0].added, columns[0].removed, columns[0].n_files) == (
        3, 1200, 1, 1, 1)
    html = page.content.decode()
    assert html.count('class="badge ok">pass</span>') == 5 and html.count('class="badge bad">fail</span>') == 1


def test_it_shows_grpo_advantages_per_column(page):
    columns = page.context["columns"]
    assert all(c.advantage is not None for c in columns)
    assert columns[0].advantage["grpo_advantage"] > 0 > columns[5].advantage["grpo_advantage"]


def test_file_matrix_has_one_row_per_path_with_blank_cells(page):
    rows = {row.path: row for row in page.context["rows"]}
    assert set(rows) == {"pkg/mod.py", "pkg/other.py", "reproduce_bug.py"}
    mod = rows["pkg/mod.py"]
    assert mod.touched == 5 and mod.cells[5].file is None
    assert rows["pkg/other.py"].fail_only
    assert 'class="col fail blank"' in page.content.decode()


def test_files_only_one_passing_trajectory_touched_are_highlighted(page):
    rows = {row.path: row for row in page.context["rows"]}
    assert rows["reproduce_bug.py"].unique and rows["reproduce_bug.py"].cells[4].unique
    assert not rows["pkg/mod.py"].unique
    assert not rows["pkg/other.py"].unique  # touched by a failing one only
    assert 'class="file-row unique"' in page.content.decode()


def test_equivalent_patches_are_marked_same_as(page):
    columns = {c.tid: c for c in page.context["columns"]}
    assert (columns["t2"].same_as, columns["t2"].same_kind) == ("t1", "identical")
    assert (columns["t3"].same_as, columns["t3"].same_kind) == ("t1", "whitespace")
    assert columns["t4"].same_as is None
    html = page.content.decode()
    assert "Identical to <b>t1</b>" in html and "up to whitespace" in html


def test_integrity_markers_are_badges_on_trajectory_and_hunk(page):
    columns = {c.tid: c for c in page.context["columns"]}
    assert "debug_output" in columns["t4"].badges and "stray_file" in columns["t5"].badges
    html = page.content.decode()
    assert re.search(r'<summary>.*?badge mk mk-debug_output', html)
    assert 'class="ln add flag"' in html  # the print line itself


def test_code_is_highlighted_by_file_type_and_escaped(client, researcher, tmp_path):
    recs = records("hl")
    recs[0]["patch"] = file_patch("web/app.js", ['if (a < b) { alert("<b>x</b>"); }'])
    import_batch(tmp_path, recs, name="hl")
    client.force_login(researcher)
    html = client.get(reverse("group", args=[Group.objects.get(group_id="hl").pk])).content.decode()
    assert '<span class="k">if</span>' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html


def test_statement_as_markdown_has_no_raw_html_and_reference_is_collapsed(client, researcher, tmp_path):
    recs = records("md", statement="**bold** <script>x()</script> [a](javascript:alert(1)) [b](https://ok.example)")
    import_batch(tmp_path, recs, name="md")
    client.force_login(researcher)
    html = client.get(reverse("group", args=[Group.objects.get(group_id="md").pk])).content.decode()
    assert "<strong>bold</strong>" in html and "&lt;script&gt;" in html and "<script>x()" not in html
    assert 'href="javascript' not in html
    assert '<a href="https://ok.example" rel="noopener noreferrer nofollow">b</a>' in html
    assert '<details class="reference">' in html  # closed by default


def test_hide_failing_works_without_javascript(client, researcher, group):
    client.force_login(researcher)
    html = client.get(reverse("group", args=[group.pk]), {"failing": "hide"}).content.decode()
    assert 'class="matrix-wrap hide-failing narrow auto"' in html
    assert 'aria-pressed="true"' in html
    shown = client.get(reverse("group", args=[group.pk])).content.decode()
    assert f'href="/groups/{group.pk}/?failing=hide"' in shown


def test_next_and_previous_follow_the_filter(client, researcher, group):
    client.force_login(researcher)
    response = client.get(reverse("group", args=[group.pk]), {"sort": "-group"})
    first = Group.objects.get(group_id="task-1")
    third = Group.objects.get(group_id="task-3")
    assert response.context["next_url"] == reverse("group", args=[first.pk]) + "?sort=-group"
    assert response.context["prev_url"] == reverse("group", args=[third.pk]) + "?sort=-group"
    html = response.content.decode()
    assert 'rel="next"' in html and 'rel="prev"' in html
    only = client.get(reverse("group", args=[group.pk]), {"q": "task-2"})
    assert only.context["next_url"] is None and only.context["prev_url"] is None


def test_interdiff_of_two_trajectories_as_partial_and_page(client, researcher, group):
    client.force_login(researcher)
    url = reverse("interdiff", args=[group.pk])
    params = {"a": _tid_pk(group, "t1"), "b": _tid_pk(group, "t4")}
    partial = client.get(url, params, headers={"HX-Request": "true"})
    html = partial.content.decode()
    assert "<html" not in html and "differs" in html
    assert re.search(r'<span class="ln add" data-o="" data-n="2">    <span class="nb">print</span>', html)
    full = client.get(url, params)
    assert "<html" in full.content.decode() and full.context["changed"] == 1
    same = client.get(url, {"a": _tid_pk(group, "t1"), "b": _tid_pk(group, "t2")})
    assert same.context["changed"] == 0


def test_interdiff_refuses_trajectories_of_another_group(client, researcher, group):
    client.force_login(researcher)
    other = Trajectory.objects.exclude(group=group).first()
    url = reverse("interdiff", args=[group.pk])
    assert client.get(url, {"a": _tid_pk(group, "t1"), "b": other.pk}).status_code == 404
    assert client.get(url, {"a": "x", "b": "1"}).status_code == 404


def test_raw_patch_is_plain_text(client, researcher, group):
    client.force_login(researcher)
    response = client.get(reverse("patch_raw", args=[_tid_pk(group, "t4")]))
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode().startswith("diff --git a/pkg/mod.py")


def test_a_huge_patch_is_cut_and_the_rest_loads_in_pages(client, researcher, tmp_path):
    lines = [f"line = {i}  # <i>{i}</i>" for i in range(100_000)]
    recs = records("huge")
    recs[5]["patch"] = file_patch("data/huge.py", lines, new=True)
    import_batch(tmp_path, recs, name="huge")
    group = Group.objects.get(group_id="huge")
    client.force_login(researcher)
    response = client.get(reverse("group", args=[group.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert len(html) < 1_000_000
    assert 'data-n="300"' in html and 'data-n="301"' not in html
    traj = _tid_pk(group, "t6")
    url = reverse("patch_file", args=[traj])
    assert f'{url}?path=data%2Fhuge.py&amp;start=301' in html
    more = client.get(url, {"path": "data/huge.py", "start": 301}, headers={"HX-Request": "true"})
    body = more.content.decode()
    assert 'data-n="301"' in body and 'data-n="2300"' in body and 'data-n="2301"' not in body
    assert "&lt;i&gt;" in body and f"start={301 + patches.PAGE_LINES}" in body
    page = client.get(url, {"path": "data/huge.py", "start": 99_000})
    assert "<html" in page.content.decode() and page.context["next_start"] is None
    assert client.get(url, {"path": "nope.py"}).status_code == 404


def test_group_page_runs_few_queries(client, researcher, group):
    client.force_login(researcher)
    url = reverse("group", args=[group.pk])
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, {"label": "mixed"}).status_code == 200
    assert len(ctx.captured_queries) <= 10, [q["sql"][:120] for q in ctx.captured_queries]


def test_unknown_group_is_404(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("group", args=[999999])).status_code == 404


def test_the_sample_group_pages_render(client, researcher, sample_batch):
    client.force_login(researcher)
    for group in Group.objects.filter(batch=sample_batch):
        assert client.get(reverse("group", args=[group.pk])).status_code == 200


def test_a_long_hunk_starts_closed_and_loads_its_lines_when_opened(client, researcher, tmp_path):
    lines = [f"value_{i} = {i}" for i in range(patches.HUNK_OPEN_LINES + 5)]
    recs = records("long")
    recs[0]["patch"] = file_patch("pkg/long.py", lines, new=True)
    import_batch(tmp_path, recs, name="long")
    group = Group.objects.get(group_id="long")
    traj = _tid_pk(group, "t1")
    client.force_login(researcher)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    url = f"{reverse('patch_file', args=[traj])}?path=pkg%2Flong.py&amp;start=1&amp;count={len(lines)}"
    assert f'<details class="hunk lazy" hx-get="{url}" hx-trigger="toggle once"' in html
    assert f'<a href="{url}">Show these {len(lines)} lines</a>' in html
    assert patches.PK_MARK not in html and 'data-n="3"' not in html.split("pkg/long.py", 2)[-1][:3000]
    rows = client.get(url.replace("&amp;", "&"), headers={"HX-Request": "true"}).content.decode()
    assert rows.count('class="ln add"') == len(lines) and "<pre" not in rows
    page = client.get(url.replace("&amp;", "&"))
    assert "<html" in page.content.decode()


def test_without_a_turn_count_the_column_counts_transcript_messages(client, researcher, tmp_path):
    recs = records("no-turns")
    for record in recs:
        record["metrics"] = {}
    recs[1].pop("messages")
    import_batch(tmp_path, recs, name="no-turns")
    client.force_login(researcher)
    response = client.get(reverse("group", args=[Group.objects.get(group_id="no-turns").pk]))
    columns = response.context["columns"]
    assert [c.messages for c in columns[:3]] == [5, None, 5]
    assert "<dt>messages</dt><dd>5</dd>" in response.content.decode()
