"""The whole run's export reads its steps a window at a time, and each step's file is still that
batch's own advantages export, byte for byte, under the step's own advantage config."""

import io
import json
import tarfile

import pyarrow.parquet as pq
import pytest

from tests.webapp.annotationdata import save, set_policy
from tests.webapp.runs.rundata import grade, import_step, step_records
from webapp.advantages import selectors as advantage_reads
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.selectors import advantage_chunks_of_batches
from webapp.advantages.services import advantage_config_update
from webapp.exports import advantages as export_advantages
from webapp.exports.advantages import write_counted
from webapp.models import Batch, Group, Run, RunStep
from webapp.rankings import UNRESTRICTED, RankingsHidden, Viewer
from webapp.runs import exports
from webapp.runs.exports import run_dataset_tar, write_run_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(tmp_path, researcher, settings):
    """Six steps that the reader cuts in windows of at most 13 groups: steps 0 and 1 (6 groups
    each) together, step 2 (6, never graded) alone, step 3 (20 groups) alone in two chunks of
    13 and 7, then step 4 (an empty batch) with step 5. Step 1 has a config of its own, and a
    group of step 0 a human ranking."""
    settings.GAGAR_EXPORT_CHUNK_GROUPS = 13
    sizes = {0: 6, 1: 6, 2: 6, 3: 20, 5: 6}
    for number, groups in sizes.items():
        batch = import_step(tmp_path, "r", number, step_records(number, groups=groups))
        if number != 2:
            grade(batch)
    RunStep.objects.create(run=Run.objects.get(name="r"), number=4, batch=Batch.objects.create(name="r/step-4"))
    advantage_config_update(batch=Batch.objects.get(name="r/step-1"),
                            config=parse_advantage_config({"schedule": "exponential", "params": {"gamma": 0.5}}))
    group = Group.objects.get(batch__name="r/step-0", group_id="task-0")
    passing = sorted(group.trajectories.filter(passed=True).values_list("trajectory_id", flat=True))
    save(group, researcher, [[tid] for tid in reversed(passing)])
    return Run.objects.get(name="r")


def batch_exports(run: Run, folder, viewer: Viewer) -> dict[int, tuple[bytes, dict]]:
    """Each step's batch exported alone (`export advantages --batch`): its bytes and counts, by step."""
    folder.mkdir()
    out = {}
    for step in RunStep.objects.filter(run=run).select_related("batch"):
        path = folder / f"{step.number}.parquet"
        written = write_counted(step.batch, path, viewer=viewer, format="parquet",
                                config=parse_advantage_config(step.batch.advantage_config))
        out[step.number] = path.read_bytes(), {"rows": written.rows, "ungraded": written.ungraded()}
    return out


def test_each_steps_file_is_its_batchs_own_export_when_steps_are_read_together(run, tmp_path, annotator):
    for viewer in (UNRESTRICTED, Viewer(annotator)):
        expected = batch_exports(run, tmp_path / f"batches-{viewer.user}", viewer)
        manifest = write_run_dataset(run, tmp_path / f"run-{viewer.user}", viewer=viewer, allow_ungraded=True)
        assert [entry["step"] for entry in manifest["steps"]] == [0, 1, 2, 3, 4, 5]
        for entry in manifest["steps"]:
            data, counts = expected[entry["step"]]
            assert (tmp_path / f"run-{viewer.user}" / entry["path"]).read_bytes() == data
            assert {"rows": entry["rows"], "ungraded": entry["ungraded"]} == counts
            assert entry["bytes"] == len(data)
    by_step = {entry["step"]: entry for entry in manifest["steps"]}
    assert by_step[1]["config"]["schedule"] == "exponential" and by_step[0]["config"]["schedule"] == "linear"
    assert by_step[2]["ungraded"]["groups"] > 0 and by_step[4]["rows"] == 0
    assert by_step[0]["counts"]["source"]["human"] > 0


def test_steps_are_read_a_window_at_a_time_and_a_larger_step_alone(run, tmp_path, monkeypatch):
    alone, reads = [], []
    read_alone, read_rows = advantage_reads.advantage_chunks, advantage_reads.trajectory_columns
    monkeypatch.setattr(advantage_reads, "advantage_chunks",
                        lambda batch, **kw: alone.append(batch.name) or read_alone(batch, **kw))
    monkeypatch.setattr(advantage_reads, "trajectory_columns", lambda pks: reads.append(len(pks)) or read_rows(pks))
    write_run_dataset(run, tmp_path / "run", viewer=UNRESTRICTED, allow_ungraded=True)
    assert alone == ["r/step-3"]
    assert reads == [12, 6, 13, 7, 6]  # steps 0 and 1, step 2, step 3's two chunks, steps 4 and 5


def test_the_tar_holds_the_same_files_as_the_folder(run, tmp_path):
    manifest = write_run_dataset(run, tmp_path / "run", viewer=UNRESTRICTED, allow_ungraded=True)
    stream = b"".join(run_dataset_tar(run, viewer=UNRESTRICTED, allow_ungraded=True))
    with tarfile.open(fileobj=io.BytesIO(stream)) as tar:
        streamed = json.loads(tar.extractfile("_manifest.json").read())
        for entry in manifest["steps"]:
            assert tar.extractfile(entry["path"]).read() == (tmp_path / "run" / entry["path"]).read_bytes()
    drop = ("created_at",)
    assert {k: v for k, v in streamed.items() if k not in drop} == {k: v for k, v in manifest.items() if k not in drop}


def test_a_step_hidden_from_the_viewer_refuses_the_export_before_anything_is_written(run, tmp_path, annotator):
    set_policy(Batch.objects.get(name="r/step-5"), blind=True)
    viewer = Viewer(annotator)
    with pytest.raises(RankingsHidden, match="r/step-5"):
        write_run_dataset(run, tmp_path / "run", viewer=viewer, allow_ungraded=True)
    assert not (tmp_path / "run").exists()
    with pytest.raises(RankingsHidden, match="r/step-5"):
        run_dataset_tar(run, viewer=viewer, allow_ungraded=True)
    steps = [(batch, parse_advantage_config(batch.advantage_config)) for batch in Batch.objects.filter(
        run_step__run=run).order_by("run_step__number")]
    with pytest.raises(RankingsHidden, match="r/step-5"):  # the reader itself, before its first window
        next(advantage_chunks_of_batches(steps, viewer=viewer))


def test_a_step_larger_than_a_window_is_written_as_it_is_read_after_the_steps_before(run, tmp_path, monkeypatch):
    streamed = []  # (batch, the step files already there)
    stream = exports.write_parquet

    def spy(batch, chunks, path):
        streamed.append((batch.name, sorted(p.parent.name for p in (tmp_path / "run").glob("step=*/*.parquet"))))
        return stream(batch, chunks, path)

    monkeypatch.setattr(exports, "write_parquet", spy)
    manifest = write_run_dataset(run, tmp_path / "run", viewer=UNRESTRICTED, allow_ungraded=True)
    assert streamed == [("r/step-3", ["step=0", "step=1", "step=2"])]  # 20 groups: read a chunk at a time
    assert [entry["step"] for entry in manifest["steps"]] == [0, 1, 2, 3, 4, 5]


def test_steps_written_together_keep_their_batch_exports_bytes_across_row_groups(run, tmp_path, monkeypatch):
    monkeypatch.setattr(export_advantages, "ROW_GROUP_ROWS", 4)  # several row groups in every file
    monkeypatch.setattr(exports, "ROWS_PER_WRITE", 10)  # and a write for every step or two
    expected = batch_exports(run, tmp_path / "batches", UNRESTRICTED)
    manifest = write_run_dataset(run, tmp_path / "run", viewer=UNRESTRICTED, allow_ungraded=True)
    for entry in manifest["steps"]:
        data = (tmp_path / "run" / entry["path"]).read_bytes()
        assert data == expected[entry["step"]][0]
        assert pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups == -(-entry["rows"] // 4)


def test_a_run_of_empty_steps_exports_a_file_of_no_rows_per_step(tmp_path):
    run = Run.objects.create(name="empty")
    for number in (0, 1):
        RunStep.objects.create(run=run, number=number, batch=Batch.objects.create(name=f"empty/step-{number}"))
    manifest = write_run_dataset(run, tmp_path / "run", viewer=UNRESTRICTED)
    assert [(entry["step"], entry["rows"]) for entry in manifest["steps"]] == [(0, 0), (1, 0)]
    for entry in manifest["steps"]:
        assert pq.read_table(tmp_path / "run" / entry["path"]).num_rows == 0
