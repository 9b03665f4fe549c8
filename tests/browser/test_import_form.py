"""Importing from the batches page in a real browser: a good SWE-bench run, then a malformed
file, then an archive of SWE-agent runs with a member that leaves its folder."""

import zipfile

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.grading.formats.formatfiles import swebench_run, write_json, write_lines
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_imports_a_swebench_run_and_sees_the_summary_then_a_bad_file_and_its_error(
        page, live_server, tmp_path):
    from webapp.models import Trajectory

    preds, report = swebench_run(tmp_path, "agent-<b>x</b>", {"django-1": True, "django-2": False, "django-3": None})
    make_user("rita", RESEARCHER)
    login(page, live_server, "rita", PASSWORD)

    page.fill("#id_name", "swebench/run-1")
    page.select_option("#id_file_format", "swebench")
    page.set_input_files("#id_paths", str(preds))
    page.set_input_files("#id_reports", str(report))
    page.click("#import button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    messages = page.locator(".messages")
    expect(messages).to_contain_text("Batch swebench/run-1 created: 2 new groups, 2 new trajectories.")
    expect(messages).to_contain_text("skipped 1 (no verdict in the evaluation report): agent-<b>x</b>/django-3")
    expect(page.locator("table.batches")).to_contain_text("swebench/run-1")
    assert Trajectory.objects.filter(batch__name="swebench/run-1").count() == 2
    screenshot(page, "import_form_done", full_page=True)

    bad = write_lines(tmp_path / "12.jsonl", [{"input": "Q", "output": "A", "step": 12}])
    page.fill("#id_name", "verl/step-12")
    page.select_option("#id_file_format", "verl")
    page.set_input_files("#id_paths", str(bad))
    page.click("#import button[type=submit]")
    expect(page.locator(".import-errors")).to_contain_text("12.jsonl:1: score: missing")
    assert not Trajectory.objects.filter(batch__name="verl/step-12").exists()
    screenshot(page, "import_form_error", full_page=True)

    archive = tmp_path / "runs.zip"
    with zipfile.ZipFile(archive, "w") as runs:
        runs.writestr("run-a/i1.traj", "{}")
        runs.writestr("../<i>evil</i>.traj", "{}")
    report = write_json(tmp_path / "a.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    page.fill("#id_name", "swe-agent/runs")
    page.select_option("#id_file_format", "swe-agent")
    page.set_input_files("#id_paths", str(archive))
    page.set_input_files("#id_reports", str(report))
    page.click("#import button[type=submit]")
    expect(page.locator(".import-errors")).to_contain_text(
        "runs.zip: ../<i>evil</i>.traj: name: leaves the archive's folder (..)")
    assert not Trajectory.objects.filter(batch__name="swe-agent/runs").exists()
    # The refused forms answer 400, which the browser logs; nothing else may go wrong.
    assert [e for e in page.watch.errors if "status of 400" not in e] == []
    assert page.watch.foreign_requests() == []
    screenshot(page, "import_form_archive_error", full_page=True)
