"""`export advantages --run` and `prune --run` from the command line."""

import json
from io import StringIO

import pyarrow.dataset as ds
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.webapp.runs.rundata import make_run
from webapp.models import Batch, RunStep, SearchState, Transcript
from webapp.search.services import batch_index

pytestmark = pytest.mark.django_db


def test_export_advantages_of_a_run_writes_a_dataset_partitioned_by_step(tmp_path):
    steps = make_run(tmp_path, "r", steps=2)
    out = StringIO()
    call_command("export", "advantages", run="r", out=str(tmp_path / "r-export"), stdout=out)
    assert "2 steps" in out.getvalue()
    manifest = json.loads((tmp_path / "r-export" / "_manifest.json").read_text())
    assert [(s["step"], s["batch"], s["config"]["schedule"]) for s in manifest["steps"]] == [
        (0, "r/step-0", "linear"), (1, "r/step-1", "linear")]
    for entry in manifest["steps"]:
        assert (tmp_path / "r-export" / entry["path"]).stat().st_size == entry["bytes"]
    table = ds.dataset(tmp_path / "r-export", partitioning="hive").to_table()
    assert table.num_rows == sum(batch.n_trajectories for batch, _ in steps.values())
    with pytest.raises(CommandError, match="exists"):
        call_command("export", "advantages", run="r", out=str(tmp_path / "r-export"))
    with pytest.raises(CommandError, match="--run: no run named 'nope'"):
        call_command("export", "advantages", run="nope", out=str(tmp_path / "x"))
    with pytest.raises(CommandError, match="give either --batch or --run"):
        call_command("export", "advantages", out=str(tmp_path / "x"))


def search_entries(batch) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM webapp_search_entry WHERE batch_id = %s", [batch.pk])
        return cursor.fetchone()[0]


def test_prune_keeps_the_last_steps_whole(tmp_path):
    steps = make_run(tmp_path, "r", steps=3)
    for batch, _ in steps.values():
        Transcript.objects.bulk_create([Transcript(trajectory=t, messages=[{"role": "user", "content": "x"}])
                                        for t in batch.groups.first().trajectories.all()])
        SearchState.objects.get_or_create(batch=batch)
        batch_index(batch.pk)
    out = StringIO()
    call_command("prune", run="r", keep_last=1, stdout=out)
    assert "pruned steps 0 to 1 (2)" in out.getvalue()
    kept = Batch.objects.get(name="r/step-2")
    assert Transcript.objects.filter(trajectory__batch_id=kept.pk).exists()
    assert not Transcript.objects.exclude(trajectory__batch_id=kept.pk).exists()
    assert search_entries(steps[0][0]) == 0 and search_entries(kept) > 0
    assert list(RunStep.objects.filter(pruned_at__isnull=False).values_list("number", flat=True).order_by(
        "number")) == [0, 1]
    out = StringIO()
    call_command("prune", run="r", keep_last=1, stdout=out)
    assert "nothing to prune" in out.getvalue()
    with pytest.raises(CommandError, match="--keep-last: must be 0 or more"):
        call_command("prune", run="r", keep_last=-1)
