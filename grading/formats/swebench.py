"""SWE-bench predictions with their evaluation reports: one group per instance, one
trajectory per run.

A predictions file is what ``swebench.harness.run_evaluation --predictions_path`` takes
(swebench/harness/utils.py, ``get_predictions_from_file``): JSON Lines, or a JSON array,
or a JSON object keyed by instance id (SWE-agent's ``preds.json``), of
``{"instance_id", "model_patch", "model_name_or_path"}``. Each path is one run, paired
with the report at the same position (``reports.py`` reads its three shapes). The
trajectory id is ``model_name_or_path``; other keys of a prediction go to ``meta``.
"""

from __future__ import annotations

from collections.abc import Iterator

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.files import Fields, TaskGiver, json_items
from grading.formats.reports import load_verdicts, reward_of
from grading.jsonl import ErrorLog
from grading.rollouts import distinct_files

_READ = ("instance_id", "model_patch", "model_name_or_path")


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    tasks = TaskGiver(inputs.tasks, errors)
    reports = dict(zip(map(str, inputs.paths), inputs.reports, strict=True))
    for path, source in distinct_files(inputs.paths, errors):
        verdicts = load_verdicts(reports[source], str(reports[source]), errors)
        for where, line, item, suspicious in json_items(path, source, errors):
            fields = Fields(item, where, line, errors)
            instance_id = fields.text("instance_id")
            run = fields.text("model_name_or_path")
            patch = fields.text("model_patch", required=False)  # null: the model gave none
            if not fields.ok:
                continue
            reward = reward_of(verdicts, instance_id, patch)
            if isinstance(reward, str):
                notes.skip(reward, f"{run}/{instance_id}")
                continue
            record = {"group_id": instance_id, "trajectory_id": run, "reward": reward, "patch": patch,
                      "meta": {key: value for key, value in item.items() if key not in _READ}}
            tasks.add_to(record, instance_id, where, line)
            yield where, line, record, suspicious
