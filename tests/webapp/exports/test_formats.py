"""The export formats' registry: a format registered here, in the test only, is offered by the
launch form and the `export` command, launched and built by the worker's code, with no
migration; registering refuses what would break later."""

import csv
import json
import re
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from django.urls import reverse

from webapp.exports import formats
from webapp.exports.advantages import Written
from webapp.exports.formats import ADVANTAGES, SFT, ExportFormat, export_format, formats_of, register_format
from webapp.exports.forms import ExportForm
from webapp.exports.selectors import exports_root
from webapp.exports.services import export_build, export_launch
from webapp.models import Export

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
CSV_COLUMNS = ("batch", "group_id", "trajectory_id", "advantage")


def write_csv(batch, chunks, path: Path, *, on_progress=None) -> Written:
    """An advantages writer of this test's own (the kind's contract, webapp/exports/formats.py)."""
    written = Written()
    with open(path, "w", encoding="utf-8", newline="") as out:
        rows = csv.writer(out)
        rows.writerow(CSV_COLUMNS)
        for chunk in chunks:
            rows.writerows([batch.name, row["group_id"], row["trajectory_id"], row["advantage"]]
                           for row in chunk.rows())
            written.add(batch, chunk)
            if on_progress:
                on_progress(written.rows, batch.n_trajectories)
    return written


def csv_format(kind=ADVANTAGES, name="csv", writer="tests.webapp.exports.test_formats:write_csv") -> ExportFormat:
    return ExportFormat(kind=kind, name=name, label="CSV", extension="csv", content_type="text/csv", writer=writer)


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """The registry as the app has it, restored after the test."""
    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))


def test_a_format_registered_in_a_test_is_offered_launched_and_built_without_a_migration(
        client, researcher, sample_batch):
    register_format(csv_format())
    client.force_login(researcher)
    panel = client.get(reverse("exports_panel", args=[sample_batch.pk]), **HTMX).content.decode()
    assert '<option value="csv">CSV</option>' in panel
    response = client.post(reverse("export_launch", args=[sample_batch.pk]),
                           {"kind": "advantages", "format": "csv", "config": "{}"})
    assert response.status_code == 302
    export = Export.objects.get()
    assert (export.kind, export.format) == ("advantages", "csv")
    export_build(export.pk)
    export.refresh_from_db()
    assert export.status == "done", export.error
    assert [f["name"] for f in export.files] == ["advantages.csv", "manifest.json"]
    folder = exports_root() / str(export.pk)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["format"], manifest["rows"]) == ("csv", sample_batch.n_trajectories)
    assert "writer" not in manifest  # Parquet's own

    jsonl = export_launch(batch=sample_batch, kind="advantages", format="jsonl", config={}, user=researcher)
    export_build(jsonl.pk)
    expected = [[row[c] for c in CSV_COLUMNS] for row in map(
        orjson.loads, (exports_root() / str(jsonl.pk) / "advantages.jsonl").read_bytes().splitlines())]
    with open(folder / "advantages.csv", encoding="utf-8", newline="") as f:
        header, *rows = csv.reader(f)
    assert tuple(header) == CSV_COLUMNS
    assert rows == [[b, g, t, str(a)] for b, g, t, a in expected]

    out = StringIO()
    call_command("makemigrations", "webapp", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_the_export_command_takes_a_registered_format(sample_batch, tmp_path):
    register_format(csv_format())
    out = tmp_path / "adv.csv"
    call_command("export", "advantages", "--batch", "sample", "--format", "csv", "--out", str(out), stdout=StringIO())
    assert next(csv.reader(out.open(encoding="utf-8"))) == list(CSV_COLUMNS)
    assert json.loads((tmp_path / "adv.csv.manifest.json").read_text())["format"] == "csv"


def test_a_kinds_format_field_is_hidden_until_it_has_a_second_format():
    assert ExportForm(kind=SFT)["format"].is_hidden
    assert not ExportForm(kind=ADVANTAGES)["format"].is_hidden
    register_format(csv_format(kind=SFT, writer="webapp.exports.sft:write_sft"))
    field = ExportForm(kind=SFT)["format"]
    assert not field.is_hidden and field.field.choices == [("jsonl", "Jsonl"), ("csv", "CSV")]
    assert field.initial == "jsonl"


@pytest.mark.parametrize(("fmt", "message"), [
    (csv_format(name="parquet"), "export format 'parquet' of advantages is already registered"),
    (csv_format(kind="dpo"), "export format 'csv': unknown kind 'dpo'; the kinds are advantages, sft"),
    (csv_format(name="x" * 17), "a name has 1 to 16 characters (Export.format)"),
    (csv_format(writer="write_csv"), "its writer is a module:function path, not 'write_csv'"),
])
def test_registering_refuses_a_taken_name_an_unknown_kind_a_long_name_or_a_writer_without_a_path(fmt, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        register_format(fmt)
    assert [f.name for f in formats_of(ADVANTAGES)] == ["parquet", "jsonl"]


def test_an_unregistered_format_is_refused_naming_the_kinds_formats():
    with pytest.raises(formats.UnknownFormat, match="format: must be one of parquet, jsonl, not 'csv'"):
        export_format(ADVANTAGES, "csv")
    with pytest.raises(formats.UnknownFormat, match="format: the grader SFT export is jsonl, not 'csv'"):
        export_format(SFT, "csv")


def test_every_registered_writer_loads():
    assert all(callable(fmt.write()) for fmt in formats.FORMATS.values())
