"""The search page: hits in statements, patches and turns, each placed, escaped and linked;
and what it says while a batch is being indexed."""

import re

import pytest
from django.urls import reverse

from tests.factories import rollout, write_jsonl
from tests.webapp.reviewdata import (
    MESSAGES,
    PAYLOAD,
    SHORT_PAYLOAD,
    file_patch,
    hostile_records,
    import_batch,
    records,
)
from webapp.batches.services import batch_import
from webapp.models import Group, Trajectory
from webapp.search import selectors, services
from webapp.search.services import batch_index

pytestmark = pytest.mark.django_db

CODE = (file_patch("pkg/models.py", ["    def __init__(self):", "        self.ready = True"], start=3)
        + file_patch("pkg/fields.py", ["    x = 1"], start=1)
        + "@@ -40,2 +40,2 @@ class Field:\n     def clean(self):\n-        return value\n"
          "+        return self.get_prep_value(os.path.join(a, b))\n")


def indexed(batch):
    """What the worker does after the import commits."""
    batch_index(batch.pk)
    return batch


@pytest.fixture
def batch(tmp_path):
    recs = records()
    recs[0]["patch"] = CODE
    recs[5]["messages"] = [*MESSAGES, {"role": "assistant", "content": "I ran the zebrafish_loader tool."}]
    return indexed(import_batch(tmp_path, recs))


def search(batch, q, **kw):
    return selectors.search(batch, q, **kw)


def test_identifiers_with_underscores_and_dots_match_as_written(batch):
    for q in ("get_prep_value", "os.path.join", "__init__", "GET_PREP"):
        hits = search(batch, q).hits
        assert [(h.kind, h.trajectory_id) for h in hits] == [("patch", "t1")], q
    # "_" and "." are themselves, not wildcards
    assert search(batch, "get%prep").hits == []
    assert search(batch, "os_path").hits == []
    assert search(batch, "self.ready =").hits[0].snippet == "+        <mark>self.ready =</mark> True"


def test_a_patch_hit_names_its_file_and_hunk_and_links_to_them(client, researcher, batch):
    (hit,) = search(batch, "get_prep_value").hits
    assert (hit.place.path, hit.place.hunk, hit.place.header) == ("pkg/fields.py", 1, "@@ -40,2 +40,2 @@ class Field:")
    group_url, anchor = hit.url.split("#")
    assert group_url == reverse("group", args=[hit.group_pk])
    client.force_login(researcher)
    assert f'id="{anchor}"' in client.get(group_url).content.decode()
    rows = client.get(hit.detail_url).content.decode()
    assert "@@ -40,2 +40,2 @@ class Field:" in rows and "x = 1" not in rows  # the file page from that hunk


def test_a_turn_hit_names_its_turn_and_role_and_links_to_it(client, researcher, batch):
    (hit,) = search(batch, "ZEBRAFISH").hits
    t6 = Trajectory.objects.get(trajectory_id="t6")
    assert (hit.kind, hit.trajectory_pk, hit.turn, hit.role) == ("turn", t6.pk, 5, "assistant")
    assert hit.url == f"{reverse('group', args=[t6.group_id])}#turn-{t6.pk}-5"
    client.force_login(researcher)
    page = client.get(hit.detail_url).content.decode()
    assert f'id="turn-{t6.pk}-5"' in page and "zebrafish_loader" in page
    # the group page's transcript panel, loaded at that turn, keeps its head
    panel = client.get(reverse("transcript", args=[t6.pk]), {"start": 5},
                       headers={"HX-Request": "true", "HX-Target": "transcript"}).content.decode()
    assert f'id="turn-{t6.pk}-5"' in panel and "Search this transcript" in panel


def test_hits_in_statements_patches_and_turns_and_a_scope(batch):
    kinds = {h.kind for h in search(batch, "adds one").hits}
    assert kinds == {"statement", "turn"}  # the statement, and the user's turn in each transcript
    assert {h.kind for h in search(batch, "adds one", kind="turn").hits} == {"turn"}
    assert search(batch, "nothing holds this").hits == []


def test_the_page_lists_hits_with_marked_snippets(client, researcher, batch):
    client.force_login(researcher)
    url = reverse("search", args=[batch.pk])
    html = client.get(url, {"q": "get_prep_value"}).content.decode()
    assert "<html" in html and "1</b> hit for" in html
    assert "self.<mark>get_prep_value</mark>(os.path.join(a, b))" in html
    assert "pkg/fields.py" in html and "Open the hunk in the group" in html
    partial = client.get(url, {"q": "zebrafish"}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in partial and "transcript turn #6 · assistant" in partial


def test_a_short_or_long_query_is_refused_with_a_reason(client, researcher, batch):
    client.force_login(researcher)
    url = reverse("search", args=[batch.pk])
    html = client.get(url, {"q": "ab"}).content.decode()
    assert "needs at least 3 characters" in html and 'class="hits"' not in html
    assert "longer than 200 characters" in client.get(url, {"q": "x" * 201}).content.decode()
    assert "Select a valid choice" in client.get(url, {"q": "abc", "kind": "grades"}).content.decode()


def test_only_users_with_a_role_may_search(client, outsider, batch):
    client.force_login(outsider)
    assert client.get(reverse("search", args=[batch.pk]), {"q": "return"}).status_code == 403


def test_hostile_text_is_escaped_in_snippets(client, researcher, tmp_path):
    batch = indexed(import_batch(tmp_path, hostile_records(), name="hostile"))
    client.force_login(researcher)
    url = reverse("search", args=[batch.pk])
    for q in ("window.__pwned", "<script>", "onerror="):
        html = client.get(url, {"q": q}).content.decode()
        hits = html.split('<ol class="hits">')[1]
        assert "<script>" not in hits and "<img" not in hits and "<svg" not in hits and "<iframe" not in hits
        assert re.search(r"<mark>[^<]*</mark>", hits), q
    html = client.get(url, {"q": "<script>"}).content.decode()
    assert "<mark>&lt;script&gt;</mark>window.__pwned=&quot;script&quot;" in html
    assert '<span class="bidi"' in client.get(url, {"q": "gnp.exe"}).content.decode()
    assert SHORT_PAYLOAD not in html and PAYLOAD not in html


def test_hits_are_paged_by_entry(client, researcher, tmp_path):
    recs = [rollout(f"g{i:02d}", "t1", 1.0, patch=file_patch("a.py", [f"needle_{i} = {i}"])) for i in range(45)]
    batch = indexed(batch_import(paths=[write_jsonl(tmp_path / "many.jsonl", recs)], batch_name="many").batch)
    seen, after, totals = [], 0, []
    while True:
        page = search(batch, "needle_", after=after)
        assert not page.total_is_lower_bound
        totals.append(page.total)
        seen += [h.group_id for h in page.hits]
        if page.next_after is None:
            break
        after = page.next_after
    assert totals == [45, 25, 5] and seen == [f"g{i:02d}" for i in range(45)]
    client.force_login(researcher)
    html = client.get(reverse("search", args=[batch.pk]), {"q": "needle_"}).content.decode()
    next_link = re.search(r'rel="next" class="btn btn-quiet" href="\?([^"]+)"', html).group(1).replace("&amp;", "&")
    second = client.get(reverse("search", args=[batch.pk]) + "?" + next_link).content.decode()
    assert "g20" in second and "g19" not in second and "First hits" in second and "25</b> hits" in second


def test_the_count_stops_at_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(selectors, "COUNT_LIMIT", 5)
    recs = [rollout(f"g{i}", "t1", 1.0, patch=file_patch("a.py", ["needle"])) for i in range(8)]
    batch = indexed(batch_import(paths=[write_jsonl(tmp_path / "b.jsonl", recs)], batch_name="b").batch)
    page = search(batch, "needle", size=4)
    assert (page.total, page.total_is_lower_bound, len(page.hits)) == (5, True, 4)
    # past the limit the pages are found in id order by the database
    first = search(batch, "needle", size=3)
    second = search(batch, "needle", size=3, after=first.next_after)
    last = search(batch, "needle", size=3, after=second.next_after)
    assert [h.group_id for p in (first, second, last) for h in p.hits] == [f"g{i}" for i in range(8)]
    assert last.next_after is None


def test_another_batch_is_not_searched(tmp_path, batch):
    other = indexed(import_batch(tmp_path, records("other-task"), name="other"))
    assert {Group.objects.get(pk=h.group_pk).batch_id for h in search(other, "return x").hits} == {other.pk}


def test_the_batch_page_links_to_the_search(client, researcher, batch):
    client.force_login(researcher)
    html = client.get(reverse("batch", args=[batch.pk])).content.decode()
    assert f'href="{reverse("search", args=[batch.pk])}"' in html


def test_while_a_batch_is_indexed_the_page_says_so_and_searches_what_is_in(client, researcher, tmp_path,
                                                                           monkeypatch):
    recs = [rollout(f"g{i}", "t1", 1.0, patch=file_patch("a.py", [f"needle_{i} = {i}"])) for i in range(5)]
    batch = batch_import(paths=[write_jsonl(tmp_path / "b.jsonl", recs)], batch_name="b").batch
    client.force_login(researcher)
    url = reverse("search", args=[batch.pk])
    html = client.get(url).content.decode()
    assert "Indexing: 0 of 5 trajectories; results may be missing." in html

    monkeypatch.setattr(services, "CHUNK_TRAJECTORIES", 3)
    monkeypatch.setattr(services, "insert_entries", _stops_after_one_chunk(services.insert_entries))
    with pytest.raises(SystemExit):
        batch_index(batch.pk)
    html = client.get(url, {"q": "needle_"}, headers={"HX-Request": "true"}).content.decode()
    assert "Indexing: 3 of 5 trajectories; results may be missing." in html
    assert "3</b> hits for" in html and "g2" in html and "g3" not in html

    monkeypatch.undo()
    batch_index(batch.pk)
    html = client.get(url, {"q": "needle_"}).content.decode()
    assert "Indexing" not in html and "5</b> hits for" in html


def _stops_after_one_chunk(insert_entries):
    calls = []

    def insert(entries):
        if calls:
            raise SystemExit("the worker stopped")
        calls.append(1)
        insert_entries(entries)
    return insert


def test_a_hit_deep_in_a_long_patch_shows_the_text_around_it(tmp_path):
    long_line = "x" * 400 + " <b>deep_needle</b> and deep_needle again " + "y" * 400
    patch = (file_patch("pkg/big.py", [f"    value_{i} = {i}" for i in range(6000)])
             + file_patch("pkg/deep.py", ["    x = 1"], start=7) + f"@@ -90,1 +90,1 @@ def f():\n-old\n+{long_line}\n"
             + file_patch("pkg/after.py", ["    deep_needle = 2"]))
    assert len(patch) > 100_000
    recs = records()
    recs[0]["patch"] = patch
    batch = indexed(import_batch(tmp_path, recs))
    hit = search(batch, "DEEP_NEEDLE").hits[0]
    assert hit.snippet == ("…" + "x" * 49 + " &lt;b&gt;<mark>deep_needle</mark>&lt;/b&gt; and <mark>deep_needle</mark> "
                           "again " + "y" * 69 + "…")  # the line's 160 characters around the first match
    assert (hit.place.path, hit.place.hunk, hit.place.header, hit.matches) == ("pkg/deep.py", 1,
                                                                               "@@ -90,1 +90,1 @@ def f():", 3)


def test_a_quoted_query_that_finds_nothing_offers_the_same_words_without_the_quotes(client, researcher, batch):
    # Search finds text as typed: a quoted phrase, as other search boxes take it, found nothing silently.
    client.force_login(researcher)
    url = reverse("search", args=[batch.pk])
    html = client.get(url, {"q": '"get_prep_value"'}).content.decode()
    assert "Nothing in this batch holds this text." in html
    assert 'search for <span class="mono">get_prep_value</span>' in html and "?q=get_prep_value" in html
    found = client.get(url, {"q": "get_prep_value"}).content.decode()
    assert "search-unquoted" not in found and "hit-head" in found
