"""`manage.py export advantages`: the worker's code path in this process, to a path."""

import hashlib
import json

import pytest
from django.core.management import CommandError, call_command

from webapp.advantages.config import parse_advantage_config
from webapp.exports.advantages import write_advantages
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db


def export(*args):
    call_command("export", "advantages", *map(str, args))


@pytest.fixture
def out_dir(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def test_it_writes_the_data_file_and_a_manifest_beside_it(sample_batch, out_dir, capsys):
    out = out_dir / "adv.parquet"
    export("--batch", "sample", "--out", out)
    reference = out_dir / "reference.parquet"
    write_advantages(sample_batch, reference, viewer=UNRESTRICTED, format="parquet",
                     config=parse_advantage_config(sample_batch.advantage_config))
    assert out.read_bytes() == reference.read_bytes()
    manifest = json.loads((out_dir / "adv.parquet.manifest.json").read_text())
    assert manifest["files"] == [{"name": "adv.parquet", "bytes": out.stat().st_size,
                                  "sha256": hashlib.sha256(out.read_bytes()).hexdigest()}]
    assert (manifest["export_id"], manifest["created_by"], manifest["rows"]) == (None, None, 45)
    assert sorted(p.name for p in out_dir.iterdir()) == ["adv.parquet", "adv.parquet.manifest.json",
                                                          "reference.parquet"]  # no temporary folder left
    assert "adv.parquet" in capsys.readouterr().out


def test_options_override_the_batchs_config(sample_batch, out_dir):
    export("--batch", "sample", "--format", "jsonl", "--out", out_dir / "a.jsonl", "--schedule", "exponential",
           "--gamma", "0.5", "--no-std")
    config = json.loads((out_dir / "a.jsonl.manifest.json").read_text())["config"]
    assert (config["schedule"], config["params"], config["norm_by_std"]) == ("exponential", {"gamma": 0.5}, False)
    assert len((out_dir / "a.jsonl").read_text().splitlines()) == 45


@pytest.mark.parametrize(("args", "message"), [
    (["--batch", "nope", "--out", "{tmp}/a.parquet"], "--batch: no batch named 'nope'"),
    (["--batch", "sample", "--format", "csv", "--out", "{tmp}/a.csv"], "argument --format: invalid choice: 'csv'"),
    (["--batch", "sample", "--w-min", "7", "--out", "{tmp}/a.parquet"], "config: schedule 'linear': w_min must be"),
    (["--batch", "sample", "--schedule", "best", "--out", "{tmp}/a.parquet"], "config: unknown schedule 'best'"),
    (["--batch", "sample", "--out", "{tmp}/missing/a.parquet"], "--out: the folder {tmp}/missing does not exist"),
    (["--batch", "sample", "--out", "{tmp}"], "--out: {tmp} is a folder"),
])
def test_bad_input_is_a_clear_error_and_writes_nothing(sample_batch, out_dir, args, message):
    before = sorted(out_dir.iterdir())
    with pytest.raises(CommandError) as error:
        export(*(a.format(tmp=out_dir) for a in args))
    assert message.format(tmp=out_dir) in str(error.value)
    assert sorted(out_dir.iterdir()) == before


def test_an_existing_file_is_replaced_only_with_force(sample_batch, out_dir):
    out = out_dir / "adv.parquet"
    out.write_bytes(b"keep me")
    with pytest.raises(CommandError, match="adv.parquet exists \\(--force replaces it\\)"):
        export("--batch", "sample", "--out", out)
    assert out.read_bytes() == b"keep me"
    export("--batch", "sample", "--out", out, "--force")
    assert out.read_bytes().startswith(b"PAR1")
    with pytest.raises(CommandError, match="exists"):  # the manifest now exists too
        export("--batch", "sample", "--out", out)


def test_it_finds_the_batch_named_with_spaces_around(sample_batch, out_dir):
    export("--batch", " sample ", "--out", out_dir / "adv.parquet")
    assert (out_dir / "adv.parquet").exists()
