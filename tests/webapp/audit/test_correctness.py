"""The dashboard's correctness section, its primary measure: each grader version against
people's verdicts (lucky passes marked, auditors' corrected rankings), checked against a hand
computation on three made-up groups and against `manage.py evaluate_grader` on the same data;
stored with the dashboard's other figures and recomputed once a lucky-pass mark or a verdict
stales it; an empty state that says what to do; labels escaped; auditors and researchers only."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from grading.evaluation import RANDOM, RANKINGS_LABEL
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save
from tests.webapp.audit.auditdata import make_set
from tests.webapp.audit.test_dashboard import computed, graded, html_tables, page, requested
from webapp.audit import figures
from webapp.audit.correctness import GRADER, VERDICTS
from webapp.audit.services import figures_refresh, verdict_save
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.management.commands import evaluate_grader
from webapp.models import Group
from webapp.rankings import UNRESTRICTED
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db

SHORTEST = "shortest patch first"
# reviewdata's patches by changed lines: t1, t2, t3 two each, t4 three, t5 four (t6 fails).
CORRECTED = [["t2"], ["t1"], ["t3"], ["t4"], ["t5"]]


def lucky(tid):
    return {tid: {"passed": False, "reason": "a lucky pass"}}


def label(batch, annotator, researcher):
    """task-1: t1 marked not truly passing; task-2: t5 marked; task-3: a researcher's audit
    verdict with the corrected ranking CORRECTED (and no mark)."""
    groups = list(Group.objects.filter(batch=batch).order_by("group_id"))
    save(groups[0], annotator, [["t2"], ["t3"], ["t4"], ["t5"]], verdicts=lucky("t1"))
    save(groups[1], annotator, [["t1"], ["t2", "t3"], ["t4"]], verdicts=lucky("t5"))
    item = make_set(researcher, batch, size=3).items.get(group=groups[2])
    save(groups[2], researcher, CORRECTED)
    verdict_save(item=item, auditor=researcher, verdict="wrong", categories=[], notes="")
    return groups, item


@pytest.fixture
def labelled(tmp_path, annotator, researcher):
    """Three groups graded by v1 as GRADER_TIERS (t1 first, t5 last), labelled by `label`."""
    batch = review_batch(tmp_path, n=3, name="correct")
    for group in Group.objects.filter(batch=batch):
        graded(group, GRADER_TIERS, "v1")
    groups, item = label(batch, annotator, researcher)
    return batch, groups, item


def rows(html):
    """The section's table: (reference, ranking, measure) -> (value, low, high, groups)."""
    return {tuple(row[1:4]): tuple(row[4:]) for row in html_tables(html)["table-correctness"][1:]}


def test_the_figures_are_the_hand_computed_ones(labelled):
    batch, _, _ = labelled
    c = figures.correctness_figures(batch, ["v1"])["v1"]
    assert (c.verdict_groups, c.ranking_groups) == (2, 1)
    got = {(r.name, key): (getattr(r, key).value, getattr(r, key).interval, getattr(r, key).n)
           for r in c.verdicts for key in ("pairwise", "top1")}
    # task-1: t1 (marked) first; 4 (correct, marked) pairs, all wrong way round; the pick is t1.
    # task-2: t5 (marked) last; all 4 pairs right; the pick is correct. Over 2 groups of 0 and 1,
    # every bootstrap interval runs from the smaller to the larger value.
    assert got[GRADER, "pairwise"] == (pytest.approx(0.5), pytest.approx((0.0, 1.0)), 2)
    assert got[GRADER, "top1"] == (pytest.approx(0.5), pytest.approx((0.0, 1.0)), 2)
    # shortest first ties t1, t2, t3: task-1 (0.5 + 0.5 + 0 + 0) / 4 and a 1/3 chance of t1; task-2 as the grader.
    assert got[SHORTEST, "pairwise"] == (pytest.approx(0.625), pytest.approx((0.25, 1.0)), 2)
    assert got[SHORTEST, "top1"] == (pytest.approx(1 / 6), pytest.approx((0.0, 1 / 3)), 2)
    # random: per group the mean of 100 shuffles; one marked of five: 1/2 pairwise, 1/5 top-1 incorrect
    assert got[RANDOM, "pairwise"][0] == pytest.approx(0.5, abs=0.1)
    assert got[RANDOM, "top1"][0] == pytest.approx(0.2, abs=0.1)
    assert [r.name for r in c.verdicts] == [r.name for r in c.rankings] == [GRADER, SHORTEST, RANDOM]

    # task-3 against CORRECTED (10 ordered pairs): the grader has t1 above t2 (0) and ties t2, t3
    # (0.5): 8.5 / 10; its pick t1 is not the best, t2. Shortest first ties t1, t2, t3 (three halves,
    # seven right): 8.5 / 10; a 1/3 chance of picking t2. One group: the interval is the value.
    grader, shortest = c.rankings[0], c.rankings[1]
    assert (grader.pairwise.value, grader.pairwise.interval, grader.top1.value) == (
        pytest.approx(0.85), pytest.approx((0.85, 0.85)), 0.0)
    assert (shortest.pairwise.value, shortest.top1.value, shortest.top1.n) == (
        pytest.approx(0.85), pytest.approx(1 / 3), 1)


def test_the_section_shows_them_per_version_with_n_intervals_and_baselines(labelled, client, auditor):
    batch, groups, _ = labelled
    for group in groups:
        graded(group, [["t5"], ["t4"], ["t2", "t3"], ["t1"]], "v2")  # reversed: t5 (task-2's lucky pass) first
    html = computed(client, auditor, batch=batch.pk).content.decode()
    shown = html_tables(html)["table-correctness"]
    assert shown[0] == ["version", "reference", "ranking", "measure", "value", "low", "high", "groups"]
    assert [row[:4] for row in shown[1:7]] == [["v1", VERDICTS, name, measure] for measure in (
        "pairwise accuracy", "top-1 incorrect") for name in (GRADER, SHORTEST, RANDOM)]
    table = {(row[0], *row[1:4]): row[4:] for row in shown[1:]}
    assert table["v1", VERDICTS, GRADER, "pairwise accuracy"] == ["0.5000", "0.0000", "1.0000", "2"]
    assert table["v1", RANKINGS_LABEL, SHORTEST, "top-1 correct"] == ["0.3333", "0.3333", "0.3333", "1"]
    # v2: task-1's t1 last (1), task-2's t5 first (0); the baselines are the same groups'
    assert table["v2", VERDICTS, GRADER, "pairwise accuracy"] == ["0.5000", "0.0000", "1.0000", "2"]
    assert table["v2", VERDICTS, GRADER, "top-1 incorrect"] == ["0.5000", "0.0000", "1.0000", "2"]
    assert table["v2", VERDICTS, SHORTEST, "pairwise accuracy"] == table["v1", VERDICTS, SHORTEST, "pairwise accuracy"]
    assert html.index('id="section-correctness"') < html.index('id="section-agreement"') < html.index(
        'id="section-proxy"')  # the measure first, the proxy a diagnostic
    assert "Diagnostic, not a target" in html and 'id="correctness-empty"' not in html
    assert "<title>Pairwise accuracy · lucky passes marked" in html and "v1 · shortest patch first" in html
    assert "n=2" in html
    csv = client.get(reverse("audit_dashboard_csv", args=["correctness"]), {"batch": batch.pk}).content.decode()
    assert csv.splitlines()[1] == f"v1,{VERDICTS},{GRADER},pairwise accuracy,0.5000,0.0000,1.0000,2"


def test_a_verdict_or_a_lucky_pass_mark_updates_the_section_once_the_worker_recomputes(
        labelled, client, auditor, annotator, researcher, django_capture_on_commit_callbacks):
    batch, groups, item = labelled
    before = rows(computed(client, auditor, batch=batch.pk).content.decode())
    assert before[RANKINGS_LABEL, GRADER, "pairwise accuracy"][0] == "0.8500"

    with django_capture_on_commit_callbacks(execute=True):  # the auditor corrects their verdict's ranking
        head = save(groups[2], researcher, GRADER_TIERS, based_on=groups[2].annotations.latest("version").version)
        verdict_save(item=item, auditor=researcher, verdict="correct", categories=[], notes="")
    assert ("correctness", "v1") in requested()
    html = page(client, auditor, batch=batch.pk).content.decode()
    assert 'id="figures-updating"' in html and rows(html) == before  # the stored figures until recomputed
    figures_refresh()
    after = rows(page(client, auditor, batch=batch.pk).content.decode())
    assert after[RANKINGS_LABEL, GRADER, "pairwise accuracy"][0] == "1.0000"
    assert after[RANKINGS_LABEL, GRADER, "top-1 correct"][0] == "1.0000"
    assert after[VERDICTS, GRADER, "pairwise accuracy"] == before[VERDICTS, GRADER, "pairwise accuracy"]

    with django_capture_on_commit_callbacks(execute=True):  # a lucky pass marked on task-3: a third group
        save(groups[2], annotator, [["t2"], ["t3"], ["t4"], ["t5"]], based_on=head.version, verdicts=lucky("t1"))
    assert requested() == {("correctness", "v1"), ("agreement", "v1"), ("concordance", "")}
    assert rows(page(client, auditor, batch=batch.pk).content.decode()) == after
    figures_refresh()
    marked = rows(page(client, auditor, batch=batch.pk).content.decode())
    assert marked[VERDICTS, GRADER, "pairwise accuracy"][::3] == ("0.3333", "3")  # (0 + 1 + 0) / 3 groups
    assert marked[RANKINGS_LABEL, GRADER, "pairwise accuracy"] == after[RANKINGS_LABEL, GRADER, "pairwise accuracy"]


def test_the_numbers_are_evaluate_grader_s_on_the_same_data(tmp_path, annotator, researcher, monkeypatch):
    """The heuristic grades the batch for real; the command ranks it again in-process."""
    batch = review_batch(tmp_path, n=3, name="same")
    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    label(batch, annotator, researcher)
    versions = figures.grader_versions(batch)
    figures.dashboard(batch, versions, all_versions=[], viewer=UNRESTRICTED)  # queues the version's parts
    figures_refresh()  # the worker stores them; the dashboard reads them back
    (shown,) = figures.dashboard(batch, versions, all_versions=[], viewer=UNRESTRICTED).versions
    stored = shown.correctness

    measured = []
    real = evaluate_grader.evaluate_correctness

    def spy(*args, **kwargs):
        measured.append(real(*args, **kwargs))
        return measured[-1]

    monkeypatch.setattr(evaluate_grader, "evaluate_correctness", spy)
    out = io.StringIO()
    call_command("evaluate_grader", batch="same", grader="heuristic", stdout=out)
    (command,) = measured
    assert f"heuristic ({shown.version.version})" in out.getvalue()
    assert (stored.verdict_groups, stored.ranking_groups) == (len(command.verdict_groups),
                                                              len(command.ranking_groups)) == (2, 1)
    for mine, theirs in ((stored.verdicts, command.verdicts), (stored.rankings, command.rankings)):
        assert [r.name for r in mine] == [GRADER] + [r.name for r in theirs[1:]]
        assert [(r.groups, r.pairwise, r.top1) for r in mine] == [(r.groups, r.pairwise, r.top1) for r in theirs]


def test_the_empty_state_says_what_to_do(tmp_path, client, auditor):
    batch = review_batch(tmp_path, n=2, name="unlabelled")
    for group in Group.objects.filter(batch=batch):
        graded(group, GRADER_TIERS, "v1")
    html = page(client, auditor, batch=batch.pk).content.decode()  # computing: no empty state yet
    assert 'id="correctness-empty"' not in html
    html = computed(client, auditor, batch=batch.pk).content.decode()
    assert 'id="correctness-empty"' in html and html_tables(html)["table-correctness"][1:] == []
    assert "Mark as not passing" in html and "save a corrected ranking" in html


def test_labels_are_escaped(tmp_path, client, auditor, annotator):
    batch = review_batch(tmp_path, n=1, name="<i>batch</i>")
    group = Group.objects.get(batch=batch)
    graded(group, GRADER_TIERS, "<script>alert(1)</script>")
    save(group, annotator, [["t2"], ["t3"], ["t4"], ["t5"]], verdicts=lucky("t1"))
    html = computed(client, auditor).content.decode()
    assert html_tables(html)["table-correctness"][1][0] == "<script>alert(1)</script>"  # as text
    assert "<script>alert(1)" not in html and "<title>Pairwise accuracy" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; · grader" in html  # the chart's labels too


def test_only_auditors_and_researchers_see_it(labelled, client):
    client.force_login(make_user("anna2", ANNOTATOR))
    assert client.get(reverse("audit_dashboard")).status_code == 403
    assert client.get(reverse("audit_dashboard_csv", args=["correctness"])).status_code == 403
