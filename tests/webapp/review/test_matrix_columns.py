"""The group page's matrix columns: default order from the visible final ranking, the layout
kept in the query string (pin, hide, reference, density, wrap), and what the corner counts."""

import re

import pytest
from django.urls import reverse

from tests.webapp.annotationdata import grade, pk_of, review_batch, save, set_policy
from tests.webapp.reviewdata import import_batch, records
from webapp.models import Group
from webapp.review import columns as layout

pytestmark = pytest.mark.django_db

GRADER_ORDER = [["t5"], ["t3", "t2"], ["t1"], ["t4"]]  # not id order: ties listed out of order too


@pytest.fixture
def group(tmp_path):
    return Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")


def page(client, user, group, **params):
    client.force_login(user)
    response = client.get(reverse("group", args=[group.pk]), params)
    assert response.status_code == 200
    return response


def tids(response, name="columns"):
    return [c.tid for c in response.context[name]]


# --- default order ------------------------------------------------------------------------


def test_without_a_ranking_columns_are_passing_then_failing_by_id(client, researcher, group):
    response = page(client, researcher, group)
    assert tids(response) == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert "Columns: passing, then failing, by id (no ranking yet)." in response.content.decode()


def test_columns_follow_the_graders_ranking_best_first_ties_by_id(client, researcher, group):
    grade(group, tiers=GRADER_ORDER)
    response = page(client, researcher, group)
    assert tids(response) == ["t5", "t2", "t3", "t1", "t4", "t6"]
    assert "Columns in the order of the final ranking (the grader&#x27;s), best first" in response.content.decode()


def test_a_human_final_ranking_orders_the_columns_over_the_grader(client, researcher, group):
    grade(group, tiers=GRADER_ORDER)
    save(group, researcher, [["t4"], ["t1"], ["t2"], ["t3"], ["t5"]])
    response = page(client, researcher, group)
    assert tids(response) == ["t4", "t1", "t2", "t3", "t5", "t6"]
    assert "the final ranking (human, version 1)" in response.content.decode()


def test_a_trajectory_a_human_marked_not_passing_goes_with_the_failing(client, researcher, group):
    save(group, researcher, [["t2"], ["t1"], ["t3"], ["t4"]],
         verdicts={"t5": {"passed": False, "reason": "edited the tests"}})
    assert tids(page(client, researcher, group)) == ["t2", "t1", "t3", "t4", "t5", "t6"]


def test_a_blind_annotator_gets_no_grader_order_from_the_columns(client, annotator, group):
    set_policy(group.batch, blind=True)
    grade(group, tiers=GRADER_ORDER)
    response = page(client, annotator, group)
    html = response.content.decode()
    assert tids(response) == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert tids(response, "all_columns") == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert "by id (the ranking is hidden until you save yours)" in html
    # every place that lists the trajectories lists them by id: the interdiff and transcript pickers too
    pks = [str(pk_of(group, tid)) for tid in ("t1", "t2", "t3", "t4", "t5", "t6")]
    positions = [html.index(f'id="t-{pk}"') for pk in pks]
    assert positions == sorted(positions)


def test_once_the_annotator_ranks_the_columns_follow_the_visible_ranking(client, annotator, group):
    set_policy(group.batch, blind=True)
    grade(group, tiers=GRADER_ORDER)
    save(group, annotator, [["t3"], ["t1"], ["t2"], ["t4"], ["t5"]])
    assert tids(page(client, annotator, group)) == ["t3", "t1", "t2", "t4", "t5", "t6"]


# --- the layout in the query string -------------------------------------------------------


def test_pinned_columns_come_first_in_the_default_order(client, researcher, group):
    grade(group, tiers=GRADER_ORDER)
    t1, t4 = pk_of(group, "t1"), pk_of(group, "t4")
    response = page(client, researcher, group, pin=[t4, t1])
    assert tids(response) == ["t1", "t4", "t5", "t2", "t3", "t6"]
    assert [c.pin_slot for c in response.context["columns"]] == [0, 1, None, None, None, None]
    html = response.content.decode()
    assert f'<th class="col pass pinned pin-0" id="t-{t1}">' in html
    assert html.count("pinned pin-1") == 9  # the head, five facet rows and a cell in each of three file rows


def test_hidden_columns_and_the_files_only_they_change_are_left_out(client, researcher, group):
    t5, t6 = pk_of(group, "t5"), pk_of(group, "t6")
    response = page(client, researcher, group, hide=[t5, t6])
    assert tids(response) == ["t1", "t2", "t3", "t4"]
    assert [row.path for row in response.context["rows"]] == ["pkg/mod.py"]  # reproduce_bug.py, pkg/other.py gone
    assert response.context["rows"][0].touched == 4
    assert '1 file · 4 of 6 trajectories</span>' in response.content.decode()
    assert tids(response, "all_columns") == ["t1", "t2", "t3", "t4", "t5", "t6"]  # the picker still lists all


def test_the_header_counts_the_groups_trajectories_with_columns_hidden(client, researcher, group):
    t1, t2, t6 = pk_of(group, "t1"), pk_of(group, "t2"), pk_of(group, "t6")
    html = page(client, researcher, group, hide=[t1, t2, t6]).content.decode()
    assert re.search(r"</span>\s*5 of 6 pass\s", html)  # not "5 of 3": the header counts the group


def test_the_column_links_toggle_one_column_and_keep_the_rest_of_the_layout(client, researcher, group):
    t1, t2 = pk_of(group, "t1"), pk_of(group, "t2")
    response = page(client, researcher, group, pin=t1, density="compact", failing="hide", sort="-group")
    links = response.context["column_links"]
    assert links[t1]["pin"] == f"/groups/{group.pk}/?sort=-group&failing=hide&density=compact"
    assert links[t2]["pin"] == f"/groups/{group.pk}/?sort=-group&failing=hide&pin={t1}&pin={t2}&density=compact"
    assert links[t2]["hide"] == f"/groups/{group.pk}/?sort=-group&failing=hide&pin={t1}&hide={t2}&density=compact"
    # another group's page keeps the density, never this group's pins
    assert "density=compact" in (response.context["next_url"] or response.context["prev_url"] or "density=compact")
    assert response.context["toggle_failing_url"] == f"/groups/{group.pk}/?sort=-group&pin={t1}&density=compact"


def test_the_picker_form_carries_the_rest_of_the_query(client, researcher, group):
    html = page(client, researcher, group, density="compact", wrap="1", q="task").content.decode()
    form = html[html.index('<form method="get" action="/groups/'):html.index("</form>", html.index("column-form"))]
    for name, value in (("q", "task"), ("density", "compact"), ("wrap", "1")):
        assert f'<input type="hidden" name="{name}" value="{value}">' in form
    assert form.count('type="checkbox" name="pin"') == 6 and form.count('type="checkbox" name="hide"') == 6


def test_what_the_address_asks_that_cannot_apply_is_said_escaped(client, researcher, group, tmp_path):
    other = import_batch(tmp_path, records("task-x"), name="other")
    stranger = pk_of(Group.objects.get(batch=other), "t1")
    pins = [pk_of(group, t) for t in ("t1", "t2", "t3", "t4")]
    response = page(client, researcher, group, pin=[*pins, "<b>x</b>", stranger], density="<i>", wrap="2")
    html = response.content.decode()
    assert [c.pin_slot for c in response.context["columns"]][:4] == [0, 1, 2, None]
    assert 'id="layout-problems"' in html
    assert "pin=&#x27;&lt;b&gt;x&lt;/b&gt;&#x27; is not a trajectory of this group" in html
    assert f"pin=&#x27;{stranger}&#x27; is not a trajectory of this group" in html
    assert "at most 3 columns can be pinned: t4 not pinned" in html
    assert "density=&#x27;&lt;i&gt;&#x27; is not understood" in html and "wrap=&#x27;2&#x27; is not understood" in html
    assert "<b>x</b>" not in html and "<i>" not in html


def test_density_and_wrap_are_classes_of_the_matrix(client, researcher, group):
    html = page(client, researcher, group, density="compact", wrap="1").content.decode()
    assert 'class="matrix-wrap compact wrap-lines"' in html
    compact = f'id="toggle-compact" class="btn toggle" data-layout href="/groups/{group.pk}/?wrap=1"'
    assert f'{compact} aria-pressed="true"' in html


def test_the_narrow_density_is_a_class_and_a_toggle_beside_compact(client, researcher, group):
    html = page(client, researcher, group, density="narrow").content.decode()
    assert 'class="matrix-wrap narrow"' in html
    assert '<link rel="stylesheet" href="/static/css/narrow.css">' in html  # whatever the window's width
    # off means wide columns: with no density a narrow window would pick narrow again
    assert (f'id="toggle-narrow" class="btn toggle" data-layout href="/groups/{group.pk}/?density=wide" '
            'aria-pressed="true"') in html
    # compact from narrow replaces it: one density at a time
    assert f'id="toggle-compact" class="btn toggle" data-layout href="/groups/{group.pk}/?density=compact"' in html


def test_without_a_density_the_windows_width_picks_narrow_or_wide(client, researcher, group):
    html = page(client, researcher, group).content.decode()
    assert 'class="matrix-wrap narrow auto"' in html
    assert f'<link rel="stylesheet" href="/static/css/narrow.css" media="{layout.AUTO_NARROW_MEDIA}">' in html
    # two toggles, narrow.css shows the one that says what the window picked
    assert (f'id="toggle-narrow" class="btn toggle if-wide-window" data-layout '
            f'href="/groups/{group.pk}/?density=narrow" aria-pressed="false"') in html
    assert (f'id="toggle-narrow-auto" class="btn toggle if-narrow-window" data-layout '
            f'href="/groups/{group.pk}/?density=wide" aria-pressed="true"') in html


@pytest.mark.parametrize("density", ["wide", "compact"])
def test_a_density_in_the_address_is_kept_whatever_the_window(client, researcher, group, density):
    response = page(client, researcher, group, density=density)
    html = response.content.decode()
    assert "narrow.css" not in html and "toggle-narrow-auto" not in html and 'id="layout-problems"' not in html
    assert f'class="matrix-wrap{" compact" if density == "compact" else ""}"' in html
    neighbour = response.context["next_url"] or response.context["prev_url"] or f"density={density}"
    assert f"density={density}" in neighbour  # and carried to the next group


# --- the reference column -----------------------------------------------------------------


def test_the_reference_is_an_optional_column_off_by_default(client, researcher, tmp_path):
    recs = records("ref-task")
    recs[0]["task"]["reference_patch"] += (
        "diff --git a/docs/fix.md b/docs/fix.md\nnew file mode 100644\n--- /dev/null\n+++ b/docs/fix.md\n"
        "@@ -0,0 +1 @@\n+only <the> reference changes this\n")
    group = Group.objects.get(batch=import_batch(tmp_path, recs, name="ref"))
    off = page(client, researcher, group)
    assert 'id="reference-column"' not in off.content.decode()
    assert [c.tid for c in off.context["matrix_columns"]] == [c.tid for c in off.context["columns"]]
    t2 = pk_of(group, "t2")
    on = page(client, researcher, group, ref="1", pin=t2)
    html = on.content.decode()
    assert [c.tid for c in on.context["matrix_columns"]][:3] == ["t2", "reference (human fix)", "t1"]
    assert '<th class="col ref" id="reference-column">' in html and "task data · not ranked" in html
    rows = {row.path: row for row in on.context["rows"]}
    assert rows["docs/fix.md"].touched == 0 and not rows["docs/fix.md"].fail_only
    assert "only &lt;the&gt; reference changes this" in html
    assert rows["pkg/mod.py"].cells[1].file.diff.path == "pkg/mod.py"  # the reference's own diff of the file
    editor = on.context["ranking"].editor  # not rankable: the editor holds the six trajectories only
    items = editor.ranked + editor.pool + editor.failing
    assert sorted(item.tid for item in items) == ["t1", "t2", "t3", "t4", "t5", "t6"]


def test_asking_for_a_reference_the_group_lacks_says_so(client, researcher, tmp_path):
    group = Group.objects.get(batch=import_batch(tmp_path, records("no-ref", reference=None), name="noref"))
    response = page(client, researcher, group, ref="1")
    assert "ref=1: this group has no reference patch" in response.content.decode()
    assert 'id="toggle-reference"' not in response.content.decode()


# --- the corner counts what is shown ------------------------------------------------------


def test_the_header_counts_what_hide_failing_shows(client, researcher, group):
    html = page(client, researcher, group).content.decode()
    assert '<span class="count-all">3 files · 6 trajectories</span>' in html
    assert '<span class="count-passing">2 files · 5 passing trajectories' in html  # pkg/other.py is t6's alone
    hidden = page(client, researcher, group, failing="hide").content.decode()
    assert 'class="matrix-wrap hide-failing narrow auto"' in hidden and "2 files · 5 passing trajectories" in hidden
    t5 = pk_of(group, "t5")
    fewer = page(client, researcher, group, failing="hide", hide=t5).content.decode()
    assert '<span class="count-passing">1 file · 4 passing trajectories' in fewer
