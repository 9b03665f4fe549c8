"""The grader dashboard: its figures are grading.agreement's on the same data, each CSV is the
table under its chart, the gold set's drift warning fires on a worse version and not on an
equal one, labels are escaped, bad selections are refused with the reason, the page shows the
stored figures ("updating" while stale, "computing" before the first time) and new data
recomputes only the figures it changes."""

import csv
import io
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.db.models.functions import Length
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from grading.agreement import rank_correlation_with, summarise
from grading.cases import GroupCase, TrajectoryCase
from grading.evaluation import ReferenceGroup, kendall_tau, proxy_tiers
from grading.rankings import ranks_from_tiers
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save, set_policy
from tests.webapp.audit.auditdata import make_set
from webapp.audit import figures
from webapp.audit.services import figures_refresh, gold_mark, verdict_save
from webapp.audit.tables import dashboard_tables
from webapp.derived import AUDIT_FIGURES, sweep_derived
from webapp.models import AuditFigures, Grading, GradingRun, Group, ReferenceProxy, Trajectory
from webapp.rankings import UNRESTRICTED
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db

REVERSED = [["t5"], ["t4"], ["t2", "t3"], ["t1"]]
HUMAN = [[["t1"], ["t2"], ["t3"], ["t4"], ["t5"]], [["t2", "t1"], ["t5"], ["t3", "t4"]],
         [["t4"], ["t1"], ["t2"], ["t3"], ["t5"]], [["t1"], ["t3"], ["t2"], ["t5"], ["t4"]]]


def graded(group, tiers, version, *, grader="heuristic", status=Grading.Status.DONE, tokens=0, seconds=None):
    """A grading of `group` by a run of `version`, as a worker leaves it."""
    now = timezone.now()
    run = GradingRun.objects.create(batch=group.batch, grader=grader, queue="cpu", grader_version=version)
    done = status == Grading.Status.DONE
    return Grading.objects.create(run=run, group=group, status=status, queued_at=now, finished_at=now,
                                  grader_version=version if done else "", tiers=tiers if done else None,
                                  tokens=tokens, duration_s=seconds)


@pytest.fixture
def data(tmp_path, annotator, auditor):
    """Six groups: v1 grades them all as GRADER_TIERS, v2 reversed; humans rank four, two of
    which are gold; v1 failed once more on task-6."""
    batch = review_batch(tmp_path, n=6, name="dash")
    groups = list(Group.objects.filter(batch=batch).order_by("pk"))
    for i, group in enumerate(groups):
        graded(group, GRADER_TIERS, "v1", tokens=100 * (i + 1), seconds=float(i + 1))
        graded(group, REVERSED, "v2")
    graded(groups[5], None, "v1", status=Grading.Status.FAILED)
    for group, tiers in zip(groups, HUMAN, strict=False):
        save(group, annotator, tiers)
    for group in groups[:2]:
        gold_mark(group=group, user=auditor)
    return batch, groups


def page(client, user, **params):
    client.force_login(user)
    return client.get(reverse("audit_dashboard"), params)


def computed(client, user, **params):
    """The page once the worker's task computed what its first view queued."""
    page(client, user, **params)
    figures_refresh()
    return page(client, user, **params)


def requested() -> set[tuple[str, str]]:
    return set(AuditFigures.objects.exclude(requested_at=None).values_list("kind", "version"))


def test_the_figures_are_grading_agreements_on_the_same_data(data, client, auditor):
    batch, groups = data
    out = figures.ranking_figures(batch, ["v1", "v2"])
    for version, tiers in (("v1", GRADER_TIERS), ("v2", REVERSED)):
        assert out[version].agreement == summarise([(human, tiers) for human in HUMAN])
        assert out[version].graded == 6
    lengths = dict(Trajectory.objects.filter(group__batch=batch).annotate(n=Length("patch"))
                   .values_list("pk", "n"))
    rows = [(ranks_from_tiers(GRADER_TIERS)[t.trajectory_id], lengths[t.pk], str(t.group_id))
            for t in Trajectory.objects.filter(group__batch=batch, passed=True).order_by("group_id", "trajectory_id")]
    assert out["v1"].bias["patch_length"] == rank_correlation_with(*zip(*rows, strict=True))
    view = GroupCase("g", "", tuple(TrajectoryCase(t.trajectory_id, True, 1.0, t.patch) for t in Trajectory.objects
                                    .filter(group=groups[0], passed=True).order_by("trajectory_id")))
    proxy = proxy_tiers(ReferenceGroup(view, groups[0].reference_patch))
    stored = ReferenceProxy.objects.get(group=groups[0]).tiers  # computed once, then read
    assert [tuple(tier) for tier in stored] == list(proxy) and ReferenceProxy.objects.count() == 6
    assert out["v1"].proxy.kendall_tau.value == pytest.approx(kendall_tau(proxy, GRADER_TIERS))
    assert out["v1"].proxy.groups_with_reference == 6
    assert (out["v1"].failure.count, out["v1"].failure.n) == (1, 7)
    assert out["v1"].cost.tokens.mean == pytest.approx(350.0) and out["v1"].cost.seconds.p50 == pytest.approx(3.5)

    html = computed(client, auditor, batch=batch.pk).content.decode()
    tau = out["v1"].agreement.kendall_tau
    assert f"<td>{tau.value:.4f}</td><td>{tau.interval[0]:.4f}</td><td>{tau.interval[1]:.4f}</td>" in html
    assert "proxy: similarity to the reference fix" in html


def test_verdict_rates_carry_wilson_intervals(tmp_path, auditor, researcher):
    batch = review_batch(tmp_path, n=4, name="verdicts")
    for group in Group.objects.filter(batch=batch):
        graded(group, GRADER_TIERS, "v1")
    audit_set = make_set(auditor, batch, size=4)
    for item, verdict in zip(audit_set.items.order_by("position"), ["wrong", "correct", "correct", "correct"],
                             strict=True):
        verdict_save(item=item, auditor=auditor, verdict=verdict,
                     categories=["wrong_scope", "other"] if verdict == "wrong" else [], notes="")
    rates = figures.verdict_figures(batch, ["v1"])["v1"]
    wrong = next(r for r in rates.verdicts if r.label == "wrong")
    assert (wrong.count, wrong.n, wrong.value) == (1, 4, 0.25)
    assert wrong.interval == pytest.approx((0.0456, 0.6994), abs=1e-4)  # Wilson 1 of 4, as tabulated
    scope = next(r for r in rates.categories if r.label == "wrong scope judgement")
    assert (scope.count, scope.n) == (1, 4)


def test_each_csv_is_the_table_under_its_chart(data, client, auditor, annotator):
    batch, groups = data
    save(groups[4], annotator, [["t1"], ["t2", "t3"], ["t4"]],  # a lucky pass marked: the correctness
         verdicts={"t5": {"passed": False, "reason": "a stray script"}})
    set_policy(batch, overlap=2)  # two annotators rank the sixth group each on their own: their concordance
    save(groups[5], annotator, GRADER_TIERS)
    save(groups[5], make_user("anna2", ANNOTATOR), REVERSED)
    html = computed(client, auditor, batch=batch.pk, version=["v1", "v2"]).content.decode()
    tables = dashboard_tables(figures.dashboard(batch, figures.grader_versions(batch),
                                                all_versions=figures.grader_versions(batch), viewer=UNRESTRICTED))
    shown = html_tables(html)
    assert set(shown) == {f"table-{name}" for name in tables}
    for name, table in tables.items():
        response = client.get(reverse("audit_dashboard_csv", args=[name]),
                              {"batch": batch.pk, "version": ["v1", "v2"]})
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        rows = list(csv.reader(io.StringIO(response.content.decode())))
        assert rows[0] == table.header
        assert rows[1:] == table.rows == shown[f"table-{name}"][1:], name
        assert rows[1:], f"{name} is empty"


def test_the_drift_warning_fires_on_a_worse_version_and_not_on_an_equal_one(tmp_path, client, auditor, annotator):
    batch = review_batch(tmp_path, n=8, name="gold")
    groups = list(Group.objects.filter(batch=batch).order_by("pk"))
    for group in groups:
        save(group, annotator, GRADER_TIERS)
        gold_mark(group=group, user=auditor)
        graded(group, GRADER_TIERS, "v1")
        graded(group, GRADER_TIERS, "v2-same")
    drift = figures.gold_drift(batch, figures.grader_versions(batch))
    assert [p.version.version for p in drift.points] == ["v1", "v2-same"] and drift.warnings == []
    assert drift.points[0].agreement.kendall_tau.value == 1.0 and drift.gold_groups == 8
    assert "drift-warning" not in page(client, auditor, batch=batch.pk).content.decode()

    for group in groups:  # a planted worse version: it ranks most groups backwards
        graded(group, REVERSED if group.pk % 4 else GRADER_TIERS, "v3-worse")
    drift = figures.gold_drift(batch, figures.grader_versions(batch))
    assert {(w.version, w.previous, w.measure) for w in drift.warnings} == {
        ("v3-worse", "v2-same", "Kendall tau-b"), ("v3-worse", "v2-same", "pairwise accuracy"),
        ("v3-worse", "v2-same", "top-1")}
    html = page(client, auditor, batch=batch.pk).content.decode()
    assert 'id="drift-warning"' in html and "v3-worse" in html


def test_labels_are_escaped(tmp_path, client, auditor):
    batch = review_batch(tmp_path, n=2, name="<i>batch</i>")
    for group in Group.objects.filter(batch=batch):
        graded(group, GRADER_TIERS, "<script>alert(1)</script>", grader="<b>bold</b>")
    html = page(client, auditor).content.decode()  # computing: the version named in the note
    assert "Computing…</strong> &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    html = computed(client, auditor).content.decode()
    assert "<script>alert(1)" not in html and "<b>bold" not in html and "<i>batch" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "<title>Factors · &lt;script&gt;" in html  # inside the SVG too


def test_a_bad_selection_is_refused_with_the_reason(data, client, auditor):
    batch, _ = data
    response = page(client, auditor, batch="x1")
    assert response.status_code == 400 and "batch: no batch &#x27;x1&#x27;" in response.content.decode()
    response = page(client, auditor, batch=batch.pk, version="v9")
    assert response.status_code == 400 and "version: &#x27;v9&#x27; graded nothing" in response.content.decode()
    assert client.get(reverse("audit_dashboard_csv", args=["nothing"])).status_code == 404
    response = client.get(reverse("audit_dashboard_csv", args=["cost"]), {"version": "v9"})
    assert response.status_code == 400 and response.content.decode() == "version: 'v9' graded nothing in this selection"


def test_only_auditors_and_researchers_see_it(data, client):
    client.force_login(make_user("anna2", ANNOTATOR))
    assert client.get(reverse("audit_dashboard")).status_code == 403
    assert client.get(reverse("audit_dashboard_csv", args=["cost"])).status_code == 403


def test_the_page_needs_few_queries_cold_and_warm(data, client, auditor, django_assert_max_num_queries):
    batch, _ = data
    client.force_login(auditor)
    for params in ({}, {"batch": batch.pk}):
        with django_assert_max_num_queries(17):  # nothing stored: the verdict rates computed, the rest queued
            assert client.get(reverse("audit_dashboard"), params).status_code == 200
        figures_refresh()
        with django_assert_max_num_queries(10):
            assert client.get(reverse("audit_dashboard"), params).status_code == 200


def test_the_page_shows_stored_figures_updating_until_the_worker_recomputes_them(
        data, client, auditor, annotator, django_capture_on_commit_callbacks):
    batch, groups = data
    client.force_login(auditor)

    def read():
        """The page, and which figures its request computed."""
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(reverse("audit_dashboard"), {"batch": batch.pk})
        assert response.status_code == 200
        sql = " ".join(q["sql"] for q in ctx.captured_queries)
        return response.content.decode(), {"verdicts": '"webapp_auditverdict"."verdict"' in sql,
                                           "agreement": "ROW_NUMBER" in sql,
                                           "gradings": "webapp_trajectory\".\"trajectory_id" in sql}

    def tau(html, version):
        return next(row[3] for row in html_tables(html)["table-agreement"][1:]
                    if row[0] == version and row[2] == "Kendall tau-b")

    html, computing = read()  # never computed: only the cheap verdict rates are computed in the request
    assert computing == {"verdicts": True, "agreement": False, "gradings": False}
    assert "Computing…</strong> v1, v2, the gold set&#x27;s drift" in html and html_tables(html)["table-agreement"] == [
        ["version", "grader", "measure", "value", "low", "high", "groups"]]
    assert requested() == {("correctness", "v1"), ("correctness", "v2"), ("agreement", "v1"), ("agreement", "v2"),
                           ("gradings", "v1"), ("gradings", "v2"), ("drift", ""), ("concordance", "")}
    assert read()[1] == {"verdicts": False, "agreement": False, "gradings": False}  # queued once, not again
    figures_refresh()  # the worker's task
    assert requested() == set()
    html, computing = read()
    assert computing == {"verdicts": False, "agreement": False, "gradings": False}
    assert 'id="figures-updating"' not in html
    before = tau(html, "v2")
    assert before == f"{summarise([(h, REVERSED) for h in HUMAN]).kendall_tau.value:.4f}"

    audit_set = make_set(auditor, batch, size=2)  # a verdict: its rates computed in the request, the correctness
    verdict_save(item=audit_set.items.first(), auditor=auditor, verdict="wrong", categories=[], notes="")
    html, computing = read()  # queued: a verdict may carry a corrected ranking
    assert computing == {"verdicts": True, "agreement": False, "gradings": False}
    assert requested() == {("correctness", "v1"), ("correctness", "v2")} and 'id="figures-updating"' in html
    figures_refresh()

    with django_capture_on_commit_callbacks(execute=True):
        save(groups[4], annotator, GRADER_TIERS)  # a fifth human ranking: the write queues the agreements
    assert requested() == {("correctness", "v1"), ("correctness", "v2"), ("agreement", "v1"), ("agreement", "v2"),
                           ("concordance", "")}
    html, computing = read()  # the stored figures, marked as updating
    assert computing == {"verdicts": False, "agreement": False, "gradings": False}
    stored_at = AuditFigures.objects.get(kind="agreement", version="v2").computed_at
    assert f"figures as of {timezone.localtime(stored_at):%Y-%m-%d %H:%M:%S}" in html and tau(html, "v2") == before
    graded_at = AuditFigures.objects.get(kind="gradings", version="v2").computed_at
    with CaptureQueriesContext(connection) as ctx:
        figures_refresh()
    assert "ROW_NUMBER" in " ".join(q["sql"] for q in ctx.captured_queries)  # the agreement
    assert AuditFigures.objects.get(kind="gradings", version="v2").computed_at == graded_at  # not computed again
    html, _ = read()
    humans = [*HUMAN, GRADER_TIERS]
    assert 'id="figures-updating"' not in html
    assert tau(html, "v2") == f"{summarise([(h, REVERSED) for h in humans]).kendall_tau.value:.4f}" != before

    graded(groups[0], GRADER_TIERS, "v2")  # v2 again on one group: its figures and the drift, not v1's
    html, _ = read()
    assert 'id="figures-updating"' in html
    assert requested() == {("correctness", "v2"), ("agreement", "v2"), ("gradings", "v2"), ("drift", "")}
    figures_refresh()
    with CaptureQueriesContext(connection) as ctx:
        assert figures.ranking_figures(batch, ["v1", "v2"])["v2"].graded == 6
    # The watermarks (the gradings', asked of grading; the annotations'; the audit's own and the
    # trajectories') and the two stored parts: nothing computed.
    assert len(ctx.captured_queries) == 5


def test_a_stored_part_reads_back_as_the_figures_computed(data):
    batch, _ = data
    versions = figures.grader_versions(batch)
    computed = (figures.ranking_figures(batch, ["v1", "v2"]), figures.verdict_figures(batch, ["v1", "v2"]),
                figures.correctness_figures(batch, ["v1", "v2"]), figures.gold_drift(batch, versions),
                figures.annotator_concordance(batch))
    assert AuditFigures.objects.filter(payload=None).count() == 0 and AuditFigures.objects.count() == 10
    assert (figures.ranking_figures(batch, ["v1", "v2"]), figures.verdict_figures(batch, ["v1", "v2"]),
            figures.correctness_figures(batch, ["v1", "v2"]), figures.gold_drift(batch, versions),
            figures.annotator_concordance(batch)) == computed  # decoded


def test_the_sweep_sends_again_for_a_part_requested_over_a_minute_ago(data, client, auditor):
    batch, _ = data
    page(client, auditor, batch=batch.pk)  # queues the parts (the message goes nowhere: no worker here)
    assert sweep_derived(AUDIT_FIGURES) == 0  # just requested: its message may still be on its way
    AuditFigures.objects.filter(kind="drift").update(requested_at=timezone.now() - timezone.timedelta(minutes=2))
    assert sweep_derived(AUDIT_FIGURES) == 1
    assert sweep_derived(AUDIT_FIGURES) == 0  # sent again just now


class _Tables(HTMLParser):
    """Each <table id=...>'s rows as lists of cell texts."""

    def __init__(self):
        super().__init__()
        self.tables, self.current, self.row, self.text = {}, None, None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.current = self.tables.setdefault(dict(attrs).get("id"), [])
        elif tag == "tr" and self.current is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.text = ""

    def handle_data(self, data):
        if self.text is not None:
            self.text += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.text is not None:
            self.row.append(self.text)
            self.text = None
        elif tag == "tr" and self.row is not None:
            if not (len(self.row) == 1 and self.row[0] == "Nothing to show."):
                self.current.append(self.row)
            self.row = None
        elif tag == "table":
            self.current = None


def html_tables(html: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return {name: rows for name, rows in parser.tables.items() if name and name.startswith("table-")}
