"""The exports panel and downloads with the plain Django client: roles, forms, files."""

import pytest
from django.urls import reverse

from grading.sft import MISSING_RATIONALE
from tests.webapp.annotationdata import save
from tests.webapp.reviewdata import import_batch, records
from webapp.exports.selectors import exports_root
from webapp.exports.services import export_build, export_launch
from webapp.models import Batch, Export, Group

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def panel(batch):
    return reverse("exports_panel", args=[batch.pk])


def launch_url(batch):
    return reverse("export_launch", args=[batch.pk])


def done_export(batch, user, format="parquet"):
    export = export_launch(batch=batch, kind="advantages", format=format, config={}, user=user)
    export_build(export.pk)
    export.refresh_from_db()
    return export


def test_it_redirects_anonymous_users_to_login(client, sample_batch):
    response = client.get(panel(sample_batch))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("role", ["annotator", "auditor", "outsider"])
def test_only_researchers_see_launch_or_download_exports(client, request, role, sample_batch, researcher):
    export = done_export(sample_batch, researcher)
    client.force_login(request.getfixturevalue(role))
    assert client.get(panel(sample_batch)).status_code == 403
    assert client.post(launch_url(sample_batch), {"kind": "advantages", "format": "jsonl"}).status_code == 403
    assert client.get(reverse("export_download", args=[export.pk, "advantages.parquet"])).status_code == 403
    assert Export.objects.count() == 1


def test_the_batch_page_holds_the_exports_panel_for_researchers_only(client, sample_batch, researcher, annotator):
    client.force_login(researcher)
    assert panel(sample_batch) in client.get(reverse("batch", args=[sample_batch.pk])).content.decode()
    client.force_login(annotator)
    assert panel(sample_batch) not in client.get(reverse("batch", args=[sample_batch.pk])).content.decode()


def test_without_htmx_it_is_a_full_page_and_with_htmx_a_fragment(client, researcher, sample_batch):
    client.force_login(researcher)
    page = client.get(panel(sample_batch)).content.decode()
    fragment = client.get(panel(sample_batch), **HTMX).content.decode()
    assert page.startswith("<!doctype html>") and "<html" not in fragment
    assert 'id="exports-body"' in page and 'id="exports-body"' in fragment
    assert "No exports yet." in fragment


def test_the_launch_form_starts_from_the_batchs_redistribution_config(client, researcher, sample_batch):
    client.force_login(researcher)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert "&quot;schedule&quot;: &quot;linear&quot;, &quot;params&quot;: {&quot;w_min&quot;: 0.2}" in body


def test_a_launch_queues_an_export_and_lists_it_with_who_and_what(client, researcher, sample_batch,
                                                                  django_capture_on_commit_callbacks):
    client.force_login(researcher)
    with django_capture_on_commit_callbacks() as sent:
        response = client.post(launch_url(sample_batch), {"kind": "advantages", "format": "jsonl",
                                                          "config": '{"params": {"w_min": 0.5}}'})
    export = Export.objects.get()
    assert response.status_code == 302 and response.url == panel(sample_batch)
    assert (export.kind, export.format, export.config["params"], export.created_by) == (
        "advantages", "jsonl", {"w_min": 0.5}, researcher)
    assert len(sent) == 1  # the task message, once the row is committed
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert f'id="export-{export.pk}"' in body and "rita" in body and "queued" in body
    assert "&quot;w_min&quot;: 0.5" in body
    assert 'hx-trigger="every 2s"' in body  # polls while an export is queued or running


def test_an_htmx_launch_answers_with_the_fresh_panel(client, researcher, sample_batch):
    client.force_login(researcher)
    response = client.post(launch_url(sample_batch), {"kind": "advantages", "format": "parquet", "config": ""},
                           **HTMX)
    export = Export.objects.get()
    assert response.status_code == 200 and f"Export #{export.pk} is queued." in response.content.decode()
    again = client.post(launch_url(sample_batch), {"kind": "advantages", "format": "parquet", "config": "{}"},
                        **HTMX)
    assert f"Export #{export.pk} is queued." in again.content.decode() and Export.objects.count() == 1


@pytest.mark.parametrize(("data", "message"), [
    ({"kind": "advantages", "format": "parquet", "config": "{nope"}, "not JSON: Expecting property name"),
    ({"kind": "advantages", "format": "parquet", "config": "[1, 2]"}, "must be a JSON object"),
    ({"kind": "advantages", "format": "parquet", "config": '{"params": {"w_min": 9}}'}, "w_min must be in (0, 1]"),
    ({"kind": "advantages", "format": "xlsx", "config": "{}"}, "Select a valid choice"),
])
def test_a_bad_launch_shows_the_reason_and_queues_nothing(client, researcher, sample_batch, data, message):
    client.force_login(researcher)
    page = client.post(launch_url(sample_batch), data)
    assert page.status_code == 400 and message in page.content.decode()
    fragment = client.post(launch_url(sample_batch), data, **HTMX)
    assert fragment.status_code == 200 and message in fragment.content.decode()  # htmx swaps only 2xx
    assert not Export.objects.exists()


def test_a_finished_export_offers_each_file_for_download(client, researcher, sample_batch):
    export = done_export(sample_batch, researcher)
    client.force_login(researcher)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    for name in ("advantages.parquet", "manifest.json"):
        assert reverse("export_download", args=[export.pk, name]) in body
    assert 'hx-trigger="every 2s"' not in body
    response = client.get(reverse("export_download", args=[export.pk, "advantages.parquet"]))
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="export-{export.pk}-advantages.parquet"'
    path = exports_root() / str(export.pk) / "advantages.parquet"
    assert b"".join(response.streaming_content) == path.read_bytes()


def test_only_the_files_of_a_finished_export_can_be_downloaded(client, researcher, sample_batch):
    export = done_export(sample_batch, researcher)
    queued = export_launch(batch=sample_batch, kind="advantages", format="jsonl", config={}, user=researcher)
    client.force_login(researcher)
    for pk, name in [(export.pk, "secrets.txt"), (export.pk, "..%2Fgagar.sqlite3"), (queued.pk, "manifest.json"),
                     (queued.pk + 1, "manifest.json")]:
        assert client.get(reverse("export_download", args=[pk, name])).status_code == 404, (pk, name)


def test_a_failed_export_shows_its_error_escaped(client, researcher, sample_batch):
    export = export_launch(batch=sample_batch, kind="advantages", format="jsonl", config={}, user=researcher)
    Export.objects.filter(pk=export.pk).update(status="failed", error="OSError: <b>disk</b> full")
    client.force_login(researcher)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert "OSError: &lt;b&gt;disk&lt;/b&gt; full" in body and "<b>disk</b>" not in body


def test_a_batch_name_is_shown_escaped(client, researcher):
    batch = Batch.objects.create(name="<script>alert(1)</script>")
    client.force_login(researcher)
    body = client.get(panel(batch)).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body


def test_an_sft_export_with_nothing_to_export_is_refused_at_launch_and_queues_nothing(client, researcher,
                                                                                      sample_batch):
    client.force_login(researcher)
    data = {"kind": "sft", "format": "jsonl", "config": "{}"}
    page = client.post(launch_url(sample_batch), data)
    assert page.status_code == 400
    assert "batch &#x27;sample&#x27; has no group whose ranking a human made or confirmed" in page.content.decode()
    fragment = client.post(launch_url(sample_batch), data, **HTMX).content.decode()
    assert "has no group whose ranking a human made or confirmed" in fragment and "ValueError" not in fragment
    assert not Export.objects.exists()


def test_an_sft_export_whose_rankings_lack_rationales_is_refused_with_the_reason(client, researcher, annotator,
                                                                                tmp_path):
    batch = import_batch(tmp_path, records("task-1"), name="<i>bare</i>")
    save(Group.objects.get(batch=batch), annotator, [["t1", "t2", "t3", "t4", "t5"]])
    client.force_login(researcher)
    body = client.post(launch_url(batch), {"kind": "sft", "format": "jsonl", "config": "{}"}).content.decode()
    assert (f"batch &#x27;&lt;i&gt;bare&lt;/i&gt;&#x27;: none of the 1 groups a human ranked can be exported "
            f"({MISSING_RATIONALE}: 1)") in body
    assert not Export.objects.exists()


def test_an_sft_split_that_leaves_train_empty_says_so_in_the_panel(client, researcher, annotator, tmp_path):
    batch = import_batch(tmp_path, records("task-1"), name="one task")
    save(Group.objects.get(batch=batch), annotator, [["t1", "t2", "t3", "t4", "t5"]],
         rationales={t: "changes one line" for t in ("t1", "t2", "t3", "t4", "t5")})
    client.force_login(researcher)
    for share, empty in ((0.999, True), (0.001, False)):
        export = export_launch(batch=batch, kind="sft", format="jsonl", config={"validation_share": share},
                               user=researcher)
        export_build(export.pk)
        export.refresh_from_db()
        assert export.status == "done", export.error
        assert ({f["name"]: f["bytes"] for f in export.files}["train.jsonl"] == 0) == empty
        row = client.get(panel(batch), **HTMX).content.decode().split(f'id="export-{export.pk}"')[1].split("</tr>")[0]
        assert ("train.jsonl is empty: the split by task put every exported group in validation" in row) == empty
