"""One rule of when a batch's advantages may be exported (no grading of it queued or running),
the same answer from the page, the API's export launch and its advantages endpoint, an
explicit override, and the manifest's count of what an export left ungraded, and why."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from tests.factories import group
from tests.webapp.annotationdata import grade, save
from tests.webapp.reviewdata import import_batch, records
from webapp.api.services import api_token_create
from webapp.exports.selectors import exports_root
from webapp.exports.services import GradingUnfinished, export_build, export_launch
from webapp.models import Export, Grading, Group

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
REFUSAL = ("grading: 1 grading of batch 'b' is queued or running: its group would be exported without its "
           "ranking (GRPO's advantages); export once grading has finished, or export anyway (allow_ungraded) "
           "and the manifest counts the groups left ungraded")


@pytest.fixture
def batch(tmp_path):
    """task-N: t1..t5 pass, t6 fails; one group in each state an export can find it in."""
    recs = [r for i in range(1, 7) for r in records(f"task-{i}")] + group("all-pass", [1, 1])
    batch = import_batch(tmp_path, recs, name="b")
    groups = {g.group_id: g for g in Group.objects.filter(batch=batch)}
    grade(groups["task-1"])  # ranked by the grader
    grade(groups["task-2"], status=Grading.Status.FAILED)
    grade(groups["task-3"], status=Grading.Status.CANCELLED)
    # task-4: never graded
    grade(groups["task-5"], [["t1"], ["t2"]])  # leaves out passing trajectories: cannot apply
    grade(groups["task-6"], status=Grading.Status.RUNNING)
    return batch


def launch(batch, user, **options):
    return export_launch(batch=batch, kind="advantages", format="jsonl", config={}, user=user, **options)


def test_an_advantages_export_is_refused_while_a_grading_of_the_batch_is_queued_or_running(batch, researcher):
    with pytest.raises(GradingUnfinished) as refused:
        launch(batch, researcher)
    assert str(refused.value) == REFUSAL
    Grading.objects.filter(status=Grading.Status.RUNNING).update(status=Grading.Status.QUEUED)
    with pytest.raises(GradingUnfinished):
        launch(batch, researcher)
    assert not Export.objects.exists()
    Grading.objects.filter(status=Grading.Status.QUEUED).update(status=Grading.Status.DONE)
    assert launch(batch, researcher).status == "queued"


def test_the_grader_sft_export_does_not_wait_for_grading(batch, researcher):
    """It holds only rankings a human made or confirmed, which no running grading changes."""
    save(Group.objects.get(batch=batch, group_id="task-6"), researcher, [["t1", "t2", "t3", "t4", "t5"]],
         rationales={t: "changes one line" for t in ("t1", "t2", "t3", "t4", "t5")})
    export = export_launch(batch=batch, kind="sft", format="jsonl", config={}, user=researcher)
    assert export.status == "queued"


def test_exported_anyway_the_manifest_counts_the_groups_left_ungraded_and_why(batch, researcher):
    export = launch(batch, researcher, allow_ungraded=True)
    export_build(export.pk)
    export.refresh_from_db()
    assert export.status == "done", export.error
    manifest = json.loads((exports_root() / export.folder / "manifest.json").read_text())
    three = {"groups": 1, "trajectories": 6}
    none = {"groups": 0, "trajectories": 0}
    assert manifest["ungraded"] == {
        "groups": 5, "trajectories": 30,
        "reasons": {"grading_running": three, "never_graded": three, "grading_failed": three,
                    "grading_cancelled": three, "fell_back": three},
    }
    assert manifest["counts"]["source"] == {"human": 0, "grader": 6, "fallback": 6, "none": 26}
    assert none not in manifest["ungraded"]["reasons"].values()


def test_a_fully_graded_export_says_nothing_was_left_ungraded(tmp_path, researcher):
    batch = import_batch(tmp_path, records("task-1") + group("all-fail", [0, 0]), name="graded")
    grade(Group.objects.get(batch=batch, group_id="task-1"))
    export = launch(batch, researcher)
    export_build(export.pk)
    manifest = json.loads((exports_root() / str(export.pk) / "manifest.json").read_text())
    empty = {"groups": 0, "trajectories": 0}
    assert manifest["ungraded"] == {"groups": 0, "trajectories": 0, "reasons": dict.fromkeys(
        ("grading_running", "never_graded", "grading_failed", "grading_cancelled", "fell_back"), empty)}


def test_the_page_refuses_with_the_same_words_and_exports_when_told_to_anyway(client, batch, researcher):
    client.force_login(researcher)
    panel = client.get(reverse("exports_panel", args=[batch.pk]), **HTMX).content.decode()
    assert "1 grading queued or running" in panel and 'name="allow_ungraded"' in panel
    url = reverse("export_launch", args=[batch.pk])
    data = {"kind": "advantages", "format": "jsonl", "config": "{}"}
    refused = client.post(url, data)
    assert refused.status_code == 400 and REFUSAL.replace("'", "&#x27;") in refused.content.decode()
    assert not Export.objects.exists()
    anyway = client.post(url, {**data, "allow_ungraded": "on"})
    assert anyway.status_code == 302 and Export.objects.get().status == "queued"
    Grading.objects.filter(status=Grading.Status.RUNNING).update(status=Grading.Status.DONE)
    panel = client.get(reverse("exports_panel", args=[batch.pk]), **HTMX).content.decode()
    assert "queued or running" not in panel and 'name="allow_ungraded"' not in panel


def test_the_api_refuses_an_export_and_holds_back_advantages_by_the_same_rule(client, batch, researcher):
    headers = {"Authorization": f"Bearer {api_token_create(user=researcher, name='t')[1]}"}
    launched = client.post(f"/api/batches/{batch.pk}/exports", {"kind": "advantages", "format": "jsonl"},
                           content_type="application/json", headers=headers)
    assert launched.status_code == 409 and launched.json() == {"errors": [REFUSAL]}
    anyway = client.post(f"/api/batches/{batch.pk}/exports",
                         {"kind": "advantages", "format": "jsonl", "allow_ungraded": True},
                         content_type="application/json", headers=headers)
    assert anyway.status_code == 202
    Export.objects.all().delete()
    held = client.get(f"/api/batches/{batch.pk}/advantages?wait=0", headers=headers)
    assert held.status_code == 202 and held.json()["grading_active"]
    Grading.objects.filter(status=Grading.Status.RUNNING).update(status=Grading.Status.DONE)
    assert client.get(f"/api/batches/{batch.pk}/advantages?wait=0", headers=headers).status_code == 200
    launched = client.post(f"/api/batches/{batch.pk}/exports", {"kind": "advantages", "format": "jsonl"},
                           content_type="application/json", headers=headers)
    assert launched.status_code == 202


def test_the_export_command_refuses_by_the_same_rule_unless_told_to_export_anyway(batch, tmp_path, capsys):
    out = tmp_path / "a.jsonl"
    with pytest.raises(CommandError, match=r"grading: 1 grading of batch 'b' is queued .*\(--allow-ungraded\)"):
        call_command("export", "advantages", "--batch", "b", "--format", "jsonl", "--out", str(out))
    assert not out.exists()
    call_command("export", "advantages", "--batch", "b", "--format", "jsonl", "--out", str(out), "--allow-ungraded")
    manifest = json.loads(out.with_name("a.jsonl.manifest.json").read_text())
    assert manifest["ungraded"]["groups"] > 0
