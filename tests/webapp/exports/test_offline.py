"""gagar_client.offline: rewards for stored rollouts, looked up in a real advantages export."""

import subprocess
import sys
from pathlib import Path

import pytest
from gagar_client.offline import MissingTrajectories, advantages_for

from webapp.advantages.config import parse_advantage_config
from webapp.advantages.selectors import advantage_rows
from webapp.exports.advantages import write_advantages
from webapp.rankings import UNRESTRICTED

pytestmark = pytest.mark.django_db

CLIENT = Path(__file__).resolve().parents[3] / "client"


@pytest.fixture(params=["parquet", "jsonl"])
def exported(request, ranked_batch, tmp_path):
    path = tmp_path / f"advantages.{request.param}"
    write_advantages(ranked_batch, path, viewer=UNRESTRICTED, format=request.param,
                     config=parse_advantage_config(ranked_batch.advantage_config))
    return path


def test_it_returns_reward_for_trainer_for_each_key_in_order(exported, ranked_batch):
    rows = advantage_rows(ranked_batch, viewer=UNRESTRICTED)
    advantage = {(r["group_id"], r["trajectory_id"]): r["advantage"] for r in rows}
    keys = [("task-2", "t5"), ("task-1", "t6"), ("solo", "t1"), ("task-2", "t5")]
    assert advantages_for(exported, keys) == [advantage[k] for k in keys]
    assert advantage[("task-2", "t5")] > 0 > advantage[("task-1", "t6")]


def test_a_trajectory_not_in_the_export_is_a_key_error_naming_it(exported):
    with pytest.raises(KeyError) as error:
        advantages_for(exported, [("task-1", "t1"), ("task-9", "t1"), ("task-1", "t99")])
    assert isinstance(error.value, MissingTrajectories)
    assert error.value.missing == [("task-9", "t1"), ("task-1", "t99")]
    assert str(error.value) == f"{exported}: 2 trajectories are not in this export: task-9/t1, task-1/t99"


def test_a_file_that_is_not_an_export_is_refused_with_its_line(tmp_path):
    bad = tmp_path / "rollouts.jsonl"
    bad.write_text('{"group_id": "g", "trajectory_id": "t", "reward_for_trainer": 1.0}\n{"group_id": "g"}\n')
    with pytest.raises(ValueError, match=f"{bad}:2: not an advantages export row"):
        advantages_for(bad, [("g", "t")])
    with pytest.raises(ValueError, match="ends in .parquet or .jsonl"):
        advantages_for(tmp_path / "advantages.csv", [("g", "t")])


def test_reading_jsonl_does_not_import_pyarrow(ranked_batch, tmp_path):
    path = tmp_path / "a.jsonl"
    config = parse_advantage_config(ranked_batch.advantage_config)
    write_advantages(ranked_batch, path, viewer=UNRESTRICTED, format="jsonl", config=config)
    code = ("import sys; from gagar_client.offline import advantages_for; "
            f"print(advantages_for({str(path)!r}, [('solo', 't2')])[0], 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=CLIENT)
    reward, imported = out.stdout.split()
    assert float(reward) < 0 and imported == "False"
