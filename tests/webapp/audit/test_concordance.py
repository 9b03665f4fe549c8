"""The annotators' concordance on the dashboard: grading.agreement's W, mean pairwise tau and
Krippendorff's alpha over each batch's groups that two annotators or more ranked independently
(each one's latest ranking), stored as a part of the figures, shown in a table with n, and
recomputed once a new ranking stales it."""

import pytest
from django.urls import reverse

from grading.agreement import kendalls_w, krippendorff_alpha_ordinal, mean_estimate, mean_pairwise_tau
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save, set_policy
from tests.webapp.audit.test_dashboard import HUMAN, REVERSED, graded, html_tables, requested
from webapp.audit import figures
from webapp.audit.concordance import EVERY_BATCH, concordance
from webapp.audit.services import figures_refresh
from webapp.models import AuditFigures, Group
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db


def overlap_batch(tmp_path, name, n, rankings):
    """A batch of `n` groups under 3-way overlap, each graded by v1; `rankings`: per group
    index, (annotator, tiers) saved in that order, each in the annotator's own chain."""
    (tmp_path / name).mkdir()
    batch = review_batch(tmp_path / name, n=n, name=name)
    set_policy(batch, overlap=3)
    groups = list(Group.objects.filter(batch=batch).order_by("pk"))
    for i, group in enumerate(groups):
        graded(group, GRADER_TIERS, "v1")
        for user, tiers in rankings.get(i, ()):
            own = group.annotations.filter(user=user).order_by("-version").first()
            save(group, user, tiers, based_on=own.version if own else 0)
    return batch


@pytest.fixture
def people(db):
    return [make_user(name, ANNOTATOR) for name in ("ann", "bob", "cid", "dee")]


@pytest.fixture
def batches(tmp_path, people):
    ann, bob, cid, dee = people
    first = overlap_batch(tmp_path, "kway", 5, {
        0: [(ann, HUMAN[0]), (bob, HUMAN[0]), (cid, HUMAN[0])],
        1: [(ann, GRADER_TIERS), (bob, REVERSED)],
        2: [(ann, HUMAN[1]), (bob, HUMAN[2]), (cid, HUMAN[3])],
        3: [(ann, HUMAN[1])],  # one ranking: nothing to compare
        4: [(bob, REVERSED), (ann, HUMAN[2]), (bob, HUMAN[2])],  # bob's second ranking is his
    })
    second = overlap_batch(tmp_path, "kway-2", 2, {0: [(ann, HUMAN[0]), (dee, HUMAN[3])],
                                                   1: [(dee, GRADER_TIERS), (cid, HUMAN[1])]})
    return first, second


def expected(name, groups):
    """The figures of `groups` (per group, every annotator's tiers), by the per-group functions."""
    return (name, len(groups), mean_estimate([kendalls_w(g) for g in groups]),
            mean_estimate([mean_pairwise_tau(g) for g in groups]),
            krippendorff_alpha_ordinal([dict(enumerate(g)) for g in groups]))


def got(row):
    return row.batch, row.groups, row.kendalls_w, row.pairwise_tau, row.alpha


def same(a, b):
    assert a[:2] == b[:2]
    for x, y in zip(a[2:4], b[2:4], strict=True):
        assert (x.value, x.n) == (pytest.approx(y.value), y.n)
        assert x.interval == pytest.approx(y.interval)
    assert a[4] == pytest.approx(b[4])


def test_each_batch_is_measured_over_its_groups_ranked_twice_or_more(batches):
    first, second = batches
    kway = [[HUMAN[0]] * 3, [GRADER_TIERS, REVERSED], [HUMAN[1], HUMAN[2], HUMAN[3]], [HUMAN[2], HUMAN[2]]]
    kway_2 = [[HUMAN[0], HUMAN[3]], [GRADER_TIERS, HUMAN[1]]]

    rows = concordance(None).batches
    assert [r.batch for r in rows] == ["kway", "kway-2", EVERY_BATCH]
    same(got(rows[0]), expected("kway", kway))
    same(got(rows[1]), expected("kway-2", kway_2))
    same(got(rows[2]), expected(EVERY_BATCH, kway + kway_2))
    assert [r.raters for r in rows] == [3, 3, 4]
    assert rows[0].kendalls_w.value < 1 and rows[0].alpha < 1  # a reversed pair and three different rankings

    (only,) = concordance(second).batches  # one batch: its own row, no total
    same(got(only), expected("kway-2", kway_2))


def test_no_overlap_gives_no_row(tmp_path, annotator):
    batch = review_batch(tmp_path, n=2, name="single")
    for group in Group.objects.filter(batch=batch):
        save(group, annotator, GRADER_TIERS)  # the final chain: no independent ranking
    assert concordance(batch).batches == []


def test_the_dashboard_shows_it_with_n_and_recomputes_it_after_a_new_ranking(batches, people, client, auditor):
    first, _ = batches
    client.force_login(auditor)

    def table(**params):
        response = client.get(reverse("audit_dashboard"), params)
        assert response.status_code == 200
        return response.content.decode(), html_tables(response.content.decode())["table-concordance"]

    html, rows = table(batch=first.pk)
    assert "the annotators&#x27; concordance" in html and rows[1:] == []  # never computed: queued
    assert ("concordance", "") in requested()
    figures_refresh()
    html, rows = table(batch=first.pk)
    assert rows[0] == ["batch", "measure", "value", "low", "high", "groups", "annotators"]
    w = concordance(first).batches[0]
    assert rows[1] == ["kway", "Kendall's W", f"{w.kendalls_w.value:.4f}", f"{w.kendalls_w.interval[0]:.4f}",
                       f"{w.kendalls_w.interval[1]:.4f}", "4", "3"]
    assert rows[3] == ["kway", "Krippendorff's alpha (ordinal)", f"{w.alpha:.4f}", "", "", "4", "3"]
    assert "Agreement among annotators" in html and "n=4" in html  # the chart, with its n

    every = table()[1]  # every batch: not computed for this selection yet
    assert every[1:] == []
    figures_refresh()
    assert [row[0] for row in table()[1][1:]] == ["kway"] * 3 + ["kway-2"] * 3 + [EVERY_BATCH] * 3

    stored = AuditFigures.objects.get(kind="concordance", batch=first)
    assert figures.annotator_concordance(first) == concordance(first)  # decoded from the stored JSON
    group = Group.objects.filter(batch=first).order_by("pk")[3]
    save(group, people[2], REVERSED)  # a second ranking of the fourth group: it counts now
    html, rows = table(batch=first.pk)
    assert 'id="figures-updating"' in html and rows[1][5] == "4"  # the stored figures, while they update
    assert ("concordance", "") in requested()
    figures_refresh()
    rows = table(batch=first.pk)[1]
    assert rows[1][5] == "5" and AuditFigures.objects.get(pk=stored.pk).computed_at > stored.computed_at
