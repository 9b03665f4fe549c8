"""The audit end to end in a real browser: 20 groups graded by the heuristic grader, an auditor
makes a set of all 20 and judges every item with the keyboard, a researcher ranks four of the
groups, and the report shows the figures grading.agreement gives on the same data."""

import json

import pytest
from playwright.sync_api import expect

from grading.agreement import summarise
from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.webapp.annotationdata import review_batch, save
from webapp.roles import AUDITOR, RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZE = 20
KEYS = ["1", "2", "3", "1"]  # correct, partly, wrong, correct, ...
HUMAN = ([["t2"], ["t1"], ["t3", "t4"], ["t5"]], [["t1"], ["t2", "t3"], ["t4"], ["t5"]])  # by item, alternating


def heuristic_graded(tmp_path, monkeypatch):
    """20 mixed groups, graded by the heuristic grader in this process."""
    from webapp.grading.services import grading_launch
    from webapp.grading.worker import gradings_process

    monkeypatch.setattr("webapp.work.enqueue", lambda *a, **k: 0)
    batch = review_batch(tmp_path, n=SIZE, name="twenty")
    run = grading_launch(batch=batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    assert run.gradings.filter(status="done").count() == SIZE
    return batch


def test_an_auditor_audits_twenty_groups_and_reads_the_report(page, live_server, tmp_path, monkeypatch):
    from webapp.models import AuditSet, AuditVerdict

    batch = heuristic_graded(tmp_path, monkeypatch)
    make_user("otto", AUDITOR)
    login(page, live_server, "otto", PASSWORD)
    page.goto(f"{live_server.url}/audit/")
    page.fill("#id_name", "all twenty")
    page.select_option("#id_source", f"batch:{batch.pk}")
    page.fill("#id_seed", "5")
    page.fill("#id_size", str(SIZE))
    page.click("#audit-create-button")
    expect(page.locator("h1")).to_have_text("all twenty")
    audit_set = AuditSet.objects.get()

    page.click("#audit-continue")
    for n in range(1, SIZE + 1):
        expect(page.locator("#audit-title")).to_contain_text(f"item {n} of {SIZE}")
        page.wait_for_load_state("load")  # the keys' script is deferred: the title shows before it runs
        page.keyboard.press(KEYS[(n - 1) % len(KEYS)])
        page.keyboard.press("s")
    expect(page.locator("#audit-all-done")).to_be_visible()
    assert AuditVerdict.objects.count() == SIZE

    items = list(audit_set.items.select_related("group", "grading").order_by("position"))
    rita = make_user("rita", RESEARCHER)
    for n, item in enumerate(items[:4]):
        save(item.group, rita, HUMAN[n % 2])
    expected = summarise([(tuple(tuple(t) for t in HUMAN[n % 2]), tuple(tuple(t) for t in item.grading.tiers))
                          for n, item in enumerate(items[:4])])  # items are numbered in group order

    page.click("#audit-report")
    expect(page.locator("#report-title")).to_contain_text("all twenty")
    for name in ("kendall_tau", "top1"):
        estimate = getattr(expected, name)
        row = page.locator(f"#report-agreement #measure-{name}")
        expect(row).to_contain_text(f"{estimate.value:.3f}")
        expect(row).to_contain_text(f"{estimate.interval[0]:.3f} to {estimate.interval[1]:.3f}")
    expect(page.locator("#report-verdicts #wrong-row")).to_contain_text("5")
    expect(page.locator("#report-versions h3")).to_have_count(1)
    screenshot(page, "audit-report-01", full_page=True)
    page.emulate_media(media="print")
    expect(page.locator("header.topbar")).to_be_hidden()
    screenshot(page, "audit-report-02-print", full_page=True)
    page.emulate_media(media="screen")

    with page.expect_download() as download:
        page.click("#report-json")
    data = json.loads(open(download.value.path()).read())
    assert download.value.suggested_filename == f"audit-report-{audit_set.pk}-all-twenty.json"
    assert data["measures"]["top1"]["n"] == 4 and data["verdicts"]["correct"]["count"] == 10
    assert not page.watch.errors and not page.watch.dialogs and not page.watch.foreign_requests()
