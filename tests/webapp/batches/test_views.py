"""The batches page and a batch's table of groups: filters, sorting, keyset pages."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.webapp.reviewdata import bare_groups, import_batch, records
from webapp.batches import selectors
from webapp.batches.selectors import GroupFilter
from webapp.models import Batch
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db


@pytest.fixture
def big_batch(db):
    batch = Batch.objects.create(name="big")
    bare_groups(batch, 130)
    return batch


def _ids(page):
    return [g.group_id for g in page.groups]


def walk(batch, flt, size=20):
    """Every page of group ids, following next cursors."""
    pages, cursor = [], ""
    while True:
        page = selectors.group_page(batch, flt, viewer=UNRESTRICTED, after=cursor, size=size)
        pages.append(_ids(page))
        if not page.next_cursor:
            return pages
        cursor = page.next_cursor




def test_index_lists_batches_with_label_counts_and_creator(client, researcher, tmp_path):
    batch = import_batch(tmp_path, records())
    Batch.objects.filter(pk=batch.pk).update(created_by=researcher)
    client.force_login(researcher)
    response = client.get(reverse("index"))
    assert response.status_code == 200
    html = response.content.decode()
    assert reverse("batch", args=[batch.pk]) in html
    assert "Mixed <b>1</b>" in html
    assert "by rita" in html


@pytest.mark.parametrize("sort", list(selectors.SORTS))
def test_keyset_pages_cover_every_group_once_in_order(big_batch, sort):
    flt = GroupFilter(sort=sort)
    pages = walk(big_batch, flt)
    seen = [gid for page in pages for gid in page]
    assert len(seen) == len(set(seen)) == 130
    column, descending = selectors.SORTS[sort]
    expected = sorted(big_batch.groups.all(), key=lambda g: (getattr(g, column), g.pk), reverse=descending)
    assert seen == [g.group_id for g in expected]


@pytest.mark.parametrize("sort", list(selectors.SORTS))
def test_previous_page_is_the_page_before(big_batch, sort):
    flt = GroupFilter(sort=sort, label="mixed")
    first = selectors.group_page(big_batch, flt, viewer=UNRESTRICTED, size=20)
    second = selectors.group_page(big_batch, flt, viewer=UNRESTRICTED, after=first.next_cursor, size=20)
    third = selectors.group_page(big_batch, flt, viewer=UNRESTRICTED, after=second.next_cursor, size=20)
    back = selectors.group_page(big_batch, flt, viewer=UNRESTRICTED, before=third.prev_cursor, size=20)
    assert _ids(back) == _ids(second)
    assert back.next_cursor and back.prev_cursor
    again = selectors.group_page(big_batch, flt, viewer=UNRESTRICTED, before=second.prev_cursor, size=20)
    assert _ids(again) == _ids(first)


def test_filters_combine(big_batch):
    flt = GroupFilter(label="mixed", pass_min=0.25, pass_max=0.75, q="needle")
    page = selectors.group_page(big_batch, flt, viewer=UNRESTRICTED)
    assert page.groups
    for g in page.groups:
        full = big_batch.groups.get(pk=g.pk)
        assert g.label == "mixed" and 0.25 <= g.pass_rate <= 0.75 and "needle" in full.statement
    assert page.total == len(page.groups)


def test_search_matches_group_id_task_id_and_statement(big_batch):
    assert _ids(selectors.group_page(big_batch, GroupFilter(q="G00012"), viewer=UNRESTRICTED)) == ["g00012"]
    assert selectors.group_page(big_batch, GroupFilter(q="needle"), viewer=UNRESTRICTED).total == 13


def test_batch_page_shows_filters_and_keeps_them_in_links(client, researcher, big_batch):
    client.force_login(researcher)
    response = client.get(reverse("batch", args=[big_batch.pk]), {"label": "mixed", "sort": "-pass_rate"})
    html = response.content.decode()
    assert response.status_code == 200
    assert '<table class="table groups-table">' in html
    assert "<b>65</b> groups match" in html
    assert 'rel="next"' in html and "label=mixed" in html
    group = big_batch.groups.filter(label="mixed").order_by("-pass_rate", "-id").first()
    assert f'{reverse("group", args=[group.pk])}?label=mixed&amp;sort=-pass_rate' in html


def test_htmx_request_gets_only_the_table(client, researcher, big_batch):
    client.force_login(researcher)
    url = reverse("batch", args=[big_batch.pk])
    response = client.get(url, {"q": "needle"}, headers={"HX-Request": "true", "HX-Target": "groups"})
    html = response.content.decode()
    assert "<html" not in html and "groups-table" in html
    assert 'hx-swap-oob="true"' in html
    assert response["Vary"] and "HX-Request" in response["Vary"]
    restore = client.get(url, headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in restore.content.decode()


def test_next_link_walks_the_table_without_javascript(client, researcher, big_batch):
    client.force_login(researcher)
    url = reverse("batch", args=[big_batch.pk])
    seen = []
    query = {}
    for _ in range(10):
        response = client.get(url, query)
        page = response.context["page"]
        seen += _ids(page)
        if not response.context["next_query"]:
            break
        query = dict(pair.split("=", 1) for pair in response.context["next_query"].split("&"))
    assert len(seen) == len(set(seen)) == 130


def test_bad_filter_values_are_ignored_not_fatal(client, researcher, big_batch):
    client.force_login(researcher)
    url = reverse("batch", args=[big_batch.pk])
    response = client.get(url, {"pass_min": "lots", "label": "nope", "sort": "evil", "after": "%%%"})
    assert response.status_code == 200
    assert response.context["page"].total == 130
    assert "Not applied: Label “nope”" in response.content.decode()


def test_the_pass_rate_filter_takes_percent_as_the_page_shows_it(client, researcher, big_batch):
    # Regression: the page showed 92% but the filter wanted 0-1 and dropped 80 without a word.
    client.force_login(researcher)
    url = reverse("batch", args=[big_batch.pk])
    response = client.get(url, {"pass_min": "80"}, HTTP_HX_REQUEST="true")
    rates = [g.pass_rate for g in response.context["page"].groups]
    assert rates and min(rates) >= 0.8 and "Not applied" not in response.content.decode()
    expected = big_batch.groups.filter(pass_rate__gte=0.8).count()
    assert response.context["page"].total == expected < 130
    assert "pass_min=80" in (response.context["next_query"] or response.context["filter_query"])
    wrong = client.get(url, {"pass_max": "150"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Not applied: Pass rate to (%) “150”: a pass rate is a percentage from 0 to 100." in wrong


def test_batch_page_links_the_grading_panel(client, researcher, big_batch):
    client.force_login(researcher)
    html = client.get(reverse("batch", args=[big_batch.pk])).content.decode()
    panel = reverse("grading_panel", args=[big_batch.pk])
    assert f'<div id="grading-panel" hx-get="{panel}" hx-trigger="load"' in html
    assert f'<a href="{panel}">' in html


def test_batch_page_runs_few_queries(client, researcher, big_batch):
    client.force_login(researcher)
    url = reverse("batch", args=[big_batch.pk])
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, {"label": "mixed", "pass_min": "0.2"}).status_code == 200
    assert len(ctx.captured_queries) <= 8, [q["sql"][:120] for q in ctx.captured_queries]


def test_unknown_batch_is_404(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("batch", args=[999999])).status_code == 404


def test_a_filtered_count_stops_at_the_limit(big_batch, monkeypatch):
    monkeypatch.setattr(selectors, "COUNT_LIMIT", 20)
    page = selectors.group_page(big_batch, GroupFilter(label="mixed"), viewer=UNRESTRICTED)
    assert (page.total, page.total_is_lower_bound) == (20, True)
    exact = selectors.group_page(big_batch, GroupFilter(q="needle"), viewer=UNRESTRICTED)
    assert (exact.total, exact.total_is_lower_bound) == (13, False)


def test_label_counts_follow_new_imports(big_batch):
    assert selectors.label_counts([big_batch])[big_batch.pk]["mixed"] == 65
    bare_groups(big_batch, 4, prefix="late")
    assert selectors.label_counts([big_batch])[big_batch.pk]["mixed"] == 67


def test_the_batch_page_says_once_why_its_groups_have_no_execution_evidence(client, researcher, tmp_path, settings):
    # Before, "No execution evidence: no mirror of ..." sat as a card on every group's page, and
    # nothing on the batch's.
    from webapp.models import GroupEvidence

    batch = import_batch(tmp_path, records("ev-1") + records("ev-2") + records("ev-3"), name="ev")
    client.force_login(researcher)
    settings.GAGAR_CODEBASES = ""
    page = client.get(reverse("batch", args=[batch.pk])).content.decode()
    assert "No execution evidence for 3 groups: execution evidence is off on this instance" in page
    settings.GAGAR_CODEBASES = "/srv/store"
    first, second, third = batch.groups.order_by("group_id")
    for group in (first, second):
        GroupEvidence.objects.create(group=group, status=GroupEvidence.Status.NONE, queued_at=timezone.now(),
                                     reason="no mirror of o/r in the codebase store $GAGAR_CODEBASES")
    page = client.get(reverse("batch", args=[batch.pk])).content.decode()
    assert page.count("No execution evidence for") == 1
    assert "No execution evidence for 2 groups: no mirror of o/r in the codebase store $GAGAR_CODEBASES" in page
