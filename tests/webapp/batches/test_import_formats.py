"""Importing the formats teams already have: through the command, the API and the batches page's form."""

import tarfile
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.grading.formats.agentruns import openhands_eval_row, openhands_row, swe_agent_traj
from tests.grading.formats.formatfiles import (
    swebench_run,
    swebench_tasks,
    verl_line,
    write_json,
    write_lines,
    zip_folders,
)
from tests.webapp.reviewdata import records
from webapp.api.services import api_token_create
from webapp.models import Batch, Group, Trajectory, Transcript

pytestmark = pytest.mark.django_db


def import_rollouts(*paths, batch="b1", **options):
    call_command("import_rollouts", *map(str, paths), batch=batch, **options)


def rewards(batch="b1"):
    return {(t.group.group_id, t.trajectory_id): t.reward
            for t in Trajectory.objects.filter(batch__name=batch).select_related("group")}


def test_swebench_runs_import_as_groups_with_rewards_tasks_and_skips_and_again_as_a_noop(tmp_path, capsys):
    a = swebench_run(tmp_path, "run-a", {"i1": True, "i2": False, "i3": None})
    b = swebench_run(tmp_path, "run-b", {"i1": False, "i2": False}, report="results", empty=("i3",))
    tasks = swebench_tasks(tmp_path / "tasks.jsonl", ["i1", "i2", "i3"])
    args = (a[0], b[0])
    options = dict(file_format="swebench", reports=[str(a[1]), str(b[1])], tasks=[str(tasks)])
    import_rollouts(*args, **options)

    assert rewards() == {("i1", "run-a"): 1.0, ("i1", "run-b"): 0.0, ("i2", "run-a"): 0.0, ("i2", "run-b"): 0.0}
    labels = dict(Group.objects.values_list("group_id", "label"))
    assert labels == {"i1": "mixed", "i2": "all_fail"}
    assert Group.objects.get(group_id="i1").statement == "Fix i1."
    assert Batch.objects.get(name="b1").sources == ["all_preds.jsonl", "all_preds.jsonl", "run-a.eval.json",
                                                    "results.json", "tasks.jsonl"]
    out = capsys.readouterr().out
    assert "2 new groups, 4 new trajectories" in out
    assert "skipped 1 (no verdict in the evaluation report): run-a/i3" in out
    assert "skipped 1 (empty patch): run-b/i3" in out

    import_rollouts(*args, append=True, **options)
    assert Trajectory.objects.count() == 4
    assert "nothing new, 4 trajectories already imported" in capsys.readouterr().out


def test_swebench_samples_of_one_model_import_named_by_their_run(tmp_path):
    runs = [swebench_run(tmp_path, run, {"i1": ok}) for run, ok in (("s1", True), ("s2", False))]
    for preds, _ in runs:
        preds.write_text(preds.read_text().replace(f'"{preds.parent.name}"', '"policy-7"'))
    options = dict(file_format="swebench", reports=[str(report) for _, report in runs])
    with pytest.raises(CommandError, match="'policy-7' of instance 'i1' is also in .*--name-by-run"):
        import_rollouts(*(preds for preds, _ in runs), **options)
    import_rollouts(*(preds for preds, _ in runs), name_by_run=True, **options)
    assert rewards() == {("i1", "s1"): 1.0, ("i1", "s2"): 0.0}


def test_swe_agent_runs_import_with_transcripts_and_metrics_idempotently(tmp_path, capsys):
    for run in ("run-a", "run-b"):
        swe_agent_traj(tmp_path / run / "i1.traj")
    reports = [write_json(tmp_path / f"{r}.json", {"resolved_ids": ids, "unresolved_ids": other})
               for r, ids, other in (("a", ["i1"], []), ("b", [], ["i1"]))]
    options = dict(file_format="swe-agent", reports=list(map(str, reports)))
    import_rollouts(tmp_path / "run-a", tmp_path / "run-b", **options)
    import_rollouts(tmp_path / "run-a", tmp_path / "run-b", append=True, **options)

    assert rewards() == {("i1", "run-a"): 1.0, ("i1", "run-b"): 0.0}
    trajectory = Trajectory.objects.get(trajectory_id="run-a")
    assert trajectory.metrics["cost"] == 0.5 and trajectory.metrics["num_turns"] == 2
    messages = Transcript.objects.get(trajectory=trajectory).messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert "nothing new, 2 trajectories already imported" in capsys.readouterr().out


def test_openhands_output_imports_with_the_report_and_its_instances_as_tasks(tmp_path, capsys):
    out = write_lines(tmp_path / "run-x" / "output.jsonl", [openhands_row("i1", "x"), openhands_row("i2", "x")])
    report = write_json(tmp_path / "run-x" / "report.json", {"resolved_ids": ["i2"], "unresolved_ids": ["i1"]})
    for _ in range(2):
        import_rollouts(out, file_format="openhands", reports=[str(report)], append=True)
    assert rewards() == {("i1", "run-x"): 0.0, ("i2", "run-x"): 1.0}
    assert Group.objects.get(group_id="i2").statement == "Fix i2."
    assert Transcript.objects.count() == 2


def test_verl_dumps_import_grouped_by_step_and_input_and_say_so(tmp_path, capsys):
    dump = write_lines(tmp_path / "7.jsonl", [verl_line(7, "Q", "A", 1.0), verl_line(7, "Q", "B", 0.0)])
    import_rollouts(dump, file_format="verl")
    import_rollouts(dump, file_format="verl", append=True)
    (group,) = Group.objects.all()
    assert group.group_id.startswith("step-7/") and group.label == "mixed" and group.statement == "Q"
    out = capsys.readouterr().out
    assert "grouped by step and input" in out
    assert "nothing new, 2 trajectories already imported" in out


def test_a_malformed_file_imports_nothing_and_names_file_line_and_key(tmp_path):
    good = write_lines(tmp_path / "1.jsonl", [verl_line(1, "Q", "A", 1.0)])
    bad = write_lines(tmp_path / "2.jsonl", [verl_line(2, "Q", "A", 1.0), {"input": "Q", "output": "A", "step": 2}])
    with pytest.raises(CommandError) as error:
        import_rollouts(good, bad, file_format="verl")
    assert str(error.value) == f"nothing imported:\n{bad}:2: score: missing"
    assert not Batch.objects.exists()


def test_a_run_without_its_report_is_refused_before_reading(tmp_path):
    preds, _ = swebench_run(tmp_path, "run-a", {"i1": True})
    with pytest.raises(CommandError, match="format swebench needs one evaluation report per run"):
        import_rollouts(preds, file_format="swebench")


@pytest.fixture
def api_headers(researcher):
    return {"Authorization": f"Bearer {api_token_create(user=researcher, name='t')[1]}"}


def test_the_api_imports_posted_files_in_a_format_and_answers_what_it_skipped(client, api_headers, tmp_path):
    preds, report = swebench_run(tmp_path, "run-a", {"i1": True, "i2": None})
    files = {"paths": SimpleUploadedFile("preds.jsonl", preds.read_bytes()),
             "reports": SimpleUploadedFile("report.json", report.read_bytes())}
    response = client.post("/api/batches/import?name=up&format=swebench", files, headers=api_headers)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["new_groups"], body["new_trajectories"]) == (1, 1)
    assert body["skipped"] == {"no verdict in the evaluation report": {"count": 1, "first": ["run-a/i2"]}}
    assert rewards("up") == {("i1", "run-a"): 1.0}


def test_the_api_names_uploaded_files_in_errors_and_refuses_formats_it_cannot_take(client, api_headers, tmp_path):
    bad = write_lines(tmp_path / "p.jsonl", [{"instance_id": "i1", "model_name_or_path": "m", "model_patch": 3}])
    report = write_json(tmp_path / "r.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    files = {"paths": SimpleUploadedFile("preds.jsonl", bad.read_bytes()),
             "reports": SimpleUploadedFile("report.json", report.read_bytes())}
    response = client.post("/api/batches/import?name=up&format=swebench", files, headers=api_headers)
    assert response.status_code == 400
    assert response.json() == {"errors": ["preds.jsonl:1: model_patch: must be a string, got 3"]}

    files = {"paths": SimpleUploadedFile("a.traj", b"{}"), "reports": SimpleUploadedFile("r.json", b"{}")}
    response = client.post("/api/batches/import?name=up&format=swe-agent", files, headers=api_headers)
    assert response.status_code == 400
    assert response.json()["errors"] == ["a.traj: file: swe-agent names each run by its folder, which an upload "
                                         "does not keep: send an archive (.zip, .tar, .tar.gz, .tgz) of run folders"]

    body = b'{"input": "Q", "output": "A", "score": 1.0, "step": 3}\n'
    response = client.post("/api/batches?name=v&format=verl&filename=3.jsonl", body,
                           content_type="application/x-ndjson", headers=api_headers)
    assert response.status_code == 201
    assert response.json()["notes"][0].startswith("verl: a dump has no group id")
    assert list(rewards("v")) == [(Group.objects.get(batch__name="v").group_id, "3.jsonl:1")]

    response = client.post("/api/batches?name=s&format=swebench", body, content_type="application/x-ndjson",
                           headers=api_headers)
    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("format: swebench needs an evaluation report per run")


def test_only_researchers_see_and_may_post_the_import_form(client, researcher, annotator, tmp_path):
    client.force_login(annotator)
    assert 'id="import"' not in client.get("/").content.decode()
    assert client.post("/batches/import/", {"name": "x", "file_format": "jsonl"}).status_code == 403
    client.force_login(researcher)
    assert 'id="import"' in client.get("/").content.decode()
    response = client.post("/batches/import/", {"name": "x", "file_format": "yaml"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()


def swe_agent_runs(folder):
    """Two SWE-agent run folders (run-a resolves i1, run-b does not) and their reports."""
    for run in ("run-a", "run-b"):
        swe_agent_traj(folder / "runs" / run / "i1" / "i1.traj")
    return [SimpleUploadedFile(f"{r}.json", write_json(folder / f"{r}.json", {
        "resolved_ids": ids, "unresolved_ids": other}).read_bytes())
        for r, ids, other in (("a", ["i1"], []), ("b", [], ["i1"]))]


def nothing_kept(settings):
    return not any((settings.DATA_DIR / "uploads").iterdir())


def test_the_api_imports_an_archive_of_swe_agent_run_folders_by_their_names(client, api_headers, tmp_path,
                                                                           settings):
    reports = swe_agent_runs(tmp_path)
    archive = zip_folders(tmp_path / "runs.zip", tmp_path / "runs")
    files = {"paths": SimpleUploadedFile("runs.zip", archive.read_bytes()), "reports": reports}
    response = client.post("/api/batches/import?name=up&format=swe-agent", files, headers=api_headers)
    assert response.status_code == 201, response.json()
    assert response.json()["notes"] == ["reports by run: run-a: a.json, run-b: b.json"]
    assert rewards("up") == {("i1", "run-a"): 1.0, ("i1", "run-b"): 0.0}
    roles = [m["role"] for m in Transcript.objects.first().messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert nothing_kept(settings)


def test_an_archive_member_with_a_bad_field_is_named_in_the_archive(client, api_headers, tmp_path):
    reports = swe_agent_runs(tmp_path)
    write_json(tmp_path / "runs" / "run-a" / "x.traj", {"info": {"submission": 7}, "history": []})
    archive = zip_folders(tmp_path / "runs.zip", tmp_path / "runs")
    files = {"paths": SimpleUploadedFile("runs.zip", archive.read_bytes()), "reports": reports}
    response = client.post("/api/batches/import?name=up&format=swe-agent", files, headers=api_headers)
    assert response.status_code == 400
    assert response.json() == {"errors": ["runs.zip: run-a/x.traj: info.submission: must be a string, got 7"]}
    assert not Batch.objects.exists()


def test_runs_and_reports_that_do_not_pair_are_refused_naming_the_runs(client, api_headers, tmp_path):
    reports = swe_agent_runs(tmp_path)
    archive = zip_folders(tmp_path / "runs.zip", tmp_path / "runs")
    files = {"paths": SimpleUploadedFile("runs.zip", archive.read_bytes()), "reports": reports[:1]}
    response = client.post("/api/batches/import?name=up&format=swe-agent", files, headers=api_headers)
    assert response.json() == {"errors": ["reports: report: the archives hold 2 runs (run-a, run-b): give one "
                                          "evaluation report per run, in that order; got 1"]}


def unsafe_archives(tmp_path):
    """(archive, the error it gets): a member leaving the folder, a link, a bomb."""
    traversal = tmp_path / "traversal.zip"
    with zipfile.ZipFile(traversal, "w") as archive:
        archive.writestr("run-a/i1.traj", "{}")
        archive.writestr("../../escaped.traj", "{}")
    link = tmp_path / "link.tar.gz"
    with tarfile.open(link, "w:gz") as archive:
        member = tarfile.TarInfo("run-a/i1.traj")
        member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(member)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("run-a/i1.traj", bytes(5 * 1024 * 1024))
    return [
        (traversal, "traversal.zip: ../../escaped.traj: name: leaves the archive's folder (..)"),
        (link, "link.tar.gz: run-a/i1.traj: member: is a symbolic link; only files and folders are unpacked"),
        (bomb, "bomb.zip: run-a/i1.traj: size: more than 1000000 bytes to unpack, the upload limit"),
    ]


def test_unsafe_archives_are_refused_by_member_and_nothing_is_imported_or_kept(client, api_headers, tmp_path,
                                                                                settings):
    settings.GAGAR_API_UPLOAD_LIMIT = 1_000_000
    report = write_json(tmp_path / "r.json", {"resolved_ids": ["i1"], "unresolved_ids": []})
    for archive, error in unsafe_archives(tmp_path):
        assert archive.stat().st_size < 100_000
        files = {"paths": SimpleUploadedFile(archive.name, archive.read_bytes()),
                 "reports": SimpleUploadedFile("r.json", report.read_bytes())}
        response = client.post("/api/batches/import?name=up&format=swe-agent", files, headers=api_headers)
        assert (response.status_code, response.json()) == (400, {"errors": [error]})
        assert not Batch.objects.exists()
        assert nothing_kept(settings)
    assert not list(settings.DATA_DIR.rglob("escaped.traj"))


def test_a_form_over_the_upload_limit_is_refused_unread(client, api_headers, researcher, tmp_path, settings):
    settings.GAGAR_API_UPLOAD_LIMIT = 1000
    files = {"paths": SimpleUploadedFile("big.jsonl", bytes(2000))}
    response = client.post("/api/batches/import?name=up&format=jsonl", files, headers=api_headers)
    assert response.status_code == 413
    (error,) = response.json()["errors"]
    assert error.startswith("the upload is ") and error.endswith("over the limit of 1000 (GAGAR_API_UPLOAD_LIMIT)")

    client.force_login(researcher)
    big = SimpleUploadedFile("big.jsonl", bytes(2000))
    response = client.post("/batches/import/", {"name": "x", "file_format": "jsonl", "paths": big})
    assert response.status_code == 413
    assert "over the limit of 1000" in response.content.decode()
    assert not Batch.objects.exists()


def test_the_form_imports_an_archive_of_openhands_runs_with_their_evaluation_output(client, researcher, tmp_path):
    for run, resolved in (("run-a", True), ("run-b", False)):
        write_lines(tmp_path / "runs" / run / "output.jsonl", [openhands_row("i1", run)])
        write_lines(tmp_path / run / "output.swebench_eval.jsonl", [openhands_eval_row("i1", resolved)])
    archive = zip_folders(tmp_path / "runs.zip", tmp_path / "runs")
    client.force_login(researcher)
    response = client.post("/batches/import/", {
        "name": "oh", "file_format": "openhands", "paths": SimpleUploadedFile("runs.zip", archive.read_bytes()),
        "reports": [SimpleUploadedFile(f"{run}.jsonl", (tmp_path / run / "output.swebench_eval.jsonl").read_bytes())
                    for run in ("run-a", "run-b")]}, follow=True)
    assert response.status_code == 200
    assert "Batch oh created: 1 new groups, 2 new trajectories." in response.content.decode()
    assert rewards("oh") == {("i1", "run-a"): 1.0, ("i1", "run-b"): 0.0}


def test_a_refused_form_import_shows_its_errors_above_the_batches_in_the_forms_words(client, researcher, tmp_path):
    path = write_lines(tmp_path / "a.jsonl", records("task-1"))
    client.force_login(researcher)

    def post(name):
        upload = SimpleUploadedFile("a.jsonl", path.read_bytes())
        return client.post("/batches/import/", {"name": name, "file_format": "jsonl", "paths": [upload]})

    assert post("<b>x</b>").status_code == 302
    refused = post("<b>x</b>")
    html = refused.content.decode()
    assert refused.status_code == 400
    assert ("Batch name: batch &#x27;&lt;b&gt;x&lt;/b&gt;&#x27; already exists; to add these rollouts to it, "
            "tick “Add to the batch if it exists”, or choose a new name") in html
    assert "--append" not in html and "--batch" not in html
    assert html.index('class="import-errors"') < html.index('class="table batches"')
    page = client.get("/").content.decode()
    assert page.index('class="table batches"') < page.index('id="import"')  # below the list when nothing failed
