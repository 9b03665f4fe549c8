"""The audit report: the same bytes every time and on every database, figures equal to
grading.agreement's on the same data, links that resolve, escaping, who may read it, and
`manage.py audit_report`."""

import hashlib
import json
from dataclasses import asdict

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from grading.agreement import summarise
from grading.audit_report import report_json
from grading.rates import wilson
from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, save
from tests.webapp.audit.auditdata import graded_batch, make_set
from webapp.audit.report import set_report
from webapp.audit.services import verdict_save
from webapp.models import AuditSet, Group
from webapp.rankings import UNRESTRICTED
from webapp.roles import ANNOTATOR, AUDITOR

pytestmark = pytest.mark.django_db

# report_json of `audited` below, as of AS_OF. Both suites (SQLite and PostgreSQL) check it:
# a change here is a change of the report format, or of the audit's numbers.
GOLDEN_SHA256 = "0623df0c91c2b1d4bd34145e103172d9b2ad71cf74361f48f20f6af9b52dc1f5"
AS_OF = "2025-06-01T00:00:00Z"
HUMAN_TIERS = {1: [["t2"], ["t1", "t3"], ["t5"], ["t4"]], 2: [["t1"], ["t2", "t3"], ["t4"], ["t5"]],
               3: [["t5"], ["t4"], ["t3"], ["t2"], ["t1"]]}


@pytest.fixture
def audited(tmp_path, auditor, researcher):
    """A set of all 8 graded groups, stratified by confidence; otto judged every item, rita two
    of them; three groups of the set ranked by rita. The set takes every group because a draw
    depends on the groups' database ids, which differ between databases and runs."""
    audit_set = make_set(auditor, graded_batch(tmp_path, n=8), name="<b>weekly</b> audit", size=8,
                         stratify_by="confidence", seed=3, bins=2)
    items = list(audit_set.items.select_related("group").order_by("position"))
    judged = [("correct", []), ("wrong", ["missed_reward_hack", "other"]), ("partly", ["preferred_verbose"]),
              ("correct", []), ("wrong", ["missed_test_edit"]), ("partly", ["other"]), ("correct", []),
              ("correct", [])]
    for item, (verdict, categories) in zip(items, judged, strict=True):
        verdict_save(item=item, auditor=auditor, verdict=verdict, categories=categories, notes="")
    for item in items[:2]:
        verdict_save(item=item, auditor=researcher, verdict="wrong", categories=["wrong_scope"], notes="")
    for n, item in enumerate(items[:3], start=1):
        save(item.group, researcher, HUMAN_TIERS[n])
    return audit_set


def test_the_json_is_the_same_bytes_every_time_and_on_every_database(audited):
    first = report_json(set_report(audited, viewer=UNRESTRICTED, as_of=AS_OF).data)
    second = report_json(set_report(AuditSet.objects.get(pk=audited.pk), viewer=UNRESTRICTED, as_of=AS_OF).data)
    assert first == second
    assert hashlib.sha256(first).hexdigest() == GOLDEN_SHA256, first.decode()


def test_without_an_as_of_the_report_holds_no_time(audited):
    assert "generated_at" not in json.loads(report_json(set_report(audited, viewer=UNRESTRICTED).data))


def test_the_figures_are_grading_agreements_on_the_same_data(audited):
    report = set_report(audited, viewer=UNRESTRICTED).data
    items = list(audited.items.select_related("group").order_by("position"))  # positions follow group order
    expected = summarise([(tuple(tuple(t) for t in HUMAN_TIERS[n]), tuple(tuple(t) for t in GRADER_TIERS))
                          for n in range(1, 4)])
    version = report["versions"]["test-1"]
    for name in ("kendall_tau", "pairwise_accuracy", "top1", "spearman"):
        estimate = getattr(expected, name)
        assert report["measures"][name] == {"value": estimate.value, "interval": list(estimate.interval), "n": 3}
        # every human-ranked group of the batch is in the set: the version's figures agree
        assert version["agreement"][name] == asdict(estimate)
    assert report["human_ranked"] == 3
    wrong = wilson(4, 10)
    assert report["measures"]["verdict:wrong"] == {"value": 0.4, "interval": list(wrong.interval), "n": 10}
    assert version["verdicts"]["wrong"] == asdict(wrong) | {"label": "wrong"}
    assert report["verdicts"]["wrong"]["count"] == 4
    assert version["graded"] == 8 and version["failure"]["value"] == 0.0
    first, second = items[0].group.group_id, items[1].group.group_id
    assert report["error_categories"]["wrong_scope"] == {
        "count": 2, "groups": sorted([f"{first} (rita)", f"{second} (rita)"])}
    assert report["design"] | {"population": 8, "size": 8, "seed": 3, "stratify_by": "confidence", "bins": 2,
                               "source": "batch", "batch": "audit", "grader_versions_audited": ["test-1"]} \
        == report["design"]
    assert [s["quota"] for s in report["strata"]] == [4, 4]


def test_the_json_is_a_download_with_a_stable_name(client, audited, auditor):
    client.force_login(auditor)
    response = client.get(reverse("audit_report_json", args=[audited.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="audit-report-{audited.pk}-bweeklyb-audit.json"'
    assert response.content == report_json(set_report(audited, viewer=UNRESTRICTED).data)


def test_the_page_shows_the_figures_with_links_that_resolve_and_escapes_names(client, audited, auditor):
    client.force_login(auditor)
    response = client.get(reverse("audit_report", args=[audited.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "<b>weekly</b>" not in page and "&lt;b&gt;weekly&lt;/b&gt;" in page
    report = set_report(audited, viewer=UNRESTRICTED).data
    tau = report["measures"]["kendall_tau"]
    assert f"{tau['value']:.3f}" in page and f"{tau['interval'][0]:.3f} to {tau['interval'][1]:.3f}" in page
    links = [href for href in _hrefs(page) if href.startswith(("/audit/items/", "/groups/"))]
    assert len(links) >= 2 * 10  # every verdict links its auditor's page and its group
    for href in sorted(set(links)):
        assert client.get(href).status_code == 200, href


def test_a_group_id_is_escaped_on_the_page_and_kept_as_it_is_in_the_json(client, audited, researcher):
    item = audited.items.order_by("position").first()
    Group.objects.filter(pk=item.group_id).update(group_id="<script>alert(1)</script>")
    client.force_login(researcher)
    page = client.get(reverse("audit_report", args=[audited.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    data = json.loads(client.get(reverse("audit_report_json", args=[audited.pk])).content)
    keys = [key for counted in data["verdicts"].values() for key in counted["groups"]]
    assert "<script>alert(1)</script> (otto)" in keys


def test_an_auditor_reads_the_report_only_once_they_judged_every_item(client, audited):
    ivy = make_user("ivy", AUDITOR)
    client.force_login(ivy)
    urls = [reverse("audit_report", args=[audited.pk]), reverse("audit_report_json", args=[audited.pk])]
    assert [client.get(url).status_code for url in urls] == [403, 403]
    page = client.get(reverse("audit_set", args=[audited.pk])).content.decode()
    assert f'href="{urls[0]}"' not in page and "Report: after your last item" in page  # no button that 403s
    for item in audited.items.all():
        verdict_save(item=item, auditor=ivy, verdict="correct", categories=[], notes="")
    assert [client.get(url).status_code for url in urls] == [200, 200]
    assert f'href="{urls[0]}"' in client.get(reverse("audit_set", args=[audited.pk])).content.decode()


def test_researchers_read_it_any_time_and_others_get_403(client, audited, researcher):
    urls = [reverse("audit_report", args=[audited.pk]), reverse("audit_report_json", args=[audited.pk])]
    client.force_login(researcher)
    assert [client.get(url).status_code for url in urls] == [200, 200]
    client.force_login(make_user("anna-only", ANNOTATOR))
    assert [client.get(url).status_code for url in urls] == [403, 403]


def test_the_command_writes_json_and_html_and_refuses_to_overwrite(audited, tmp_path):
    out = tmp_path / "report.json"
    call_command("audit_report", "--set", audited.name, "--format", "json", "--out", str(out), "--as-of", AS_OF)
    assert out.read_bytes() == report_json(set_report(audited, viewer=UNRESTRICTED, as_of=AS_OF).data)
    with pytest.raises(CommandError, match="exists; give --force to replace it"):
        call_command("audit_report", "--set", audited.name, "--format", "json", "--out", str(out))
    assert out.read_bytes() == report_json(set_report(audited, viewer=UNRESTRICTED, as_of=AS_OF).data)
    call_command("audit_report", "--set", audited.name, "--format", "json", "--out", str(out), "--force")
    assert out.read_bytes() == report_json(set_report(audited, viewer=UNRESTRICTED).data)
    html = tmp_path / "report.html"
    call_command("audit_report", "--set", audited.name, "--format", "html", "--out", str(html))
    text = html.read_text()
    assert "Audit report · &lt;b&gt;weekly&lt;/b&gt; audit" in text and "Agreement with people" in text


def test_the_command_names_a_missing_set(tmp_path):
    with pytest.raises(CommandError, match="set: no audit set named 'nope'"):
        call_command("audit_report", "--set", "nope", "--format", "json", "--out", str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()


def _hrefs(page: str) -> list[str]:
    return [part.split('"', 1)[0] for part in page.split('href="')[1:]]
