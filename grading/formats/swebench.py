"""SWE-bench predictions with their evaluation reports: one group per instance, one
trajectory per run.

A predictions file is what ``swebench.harness.run_evaluation --predictions_path`` takes
(swebench/harness/utils.py, ``get_predictions_from_file``): JSON Lines (SWE-agent 0.x's and
the experiments repository's ``all_preds.jsonl``, OpenHands' ``output.swebench.jsonl``), or
a JSON array, or a JSON object keyed by instance id (SWE-agent 1.x's and mini-swe-agent's
``preds.json``), of ``{"instance_id", "model_patch", "model_name_or_path"}``; a null or
missing ``model_patch`` is an empty patch. A path may also be the run folder holding
``all_preds.jsonl`` or ``preds.json``. Each path is one run, paired with the report at the
same position (``reports.py`` reads its shapes). The trajectory id is
``model_name_or_path``, or with ``name_by_run`` the run's name (``run_name``), for several
runs of one model (samples of one policy); other keys of a prediction go to ``meta``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.files import Fields, TaskGiver, inside, json_items
from grading.formats.reports import load_verdicts, reward_of
from grading.jsonl import ErrorLog
from grading.rollouts import distinct_files

_READ = ("instance_id", "model_patch", "model_name_or_path")
PREDICTION_FILES = ("all_preds.jsonl", "preds.json")


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    tasks = TaskGiver(inputs.tasks, errors)
    reports = dict(zip(map(str, inputs.paths), inputs.reports, strict=True))
    first_run: dict[tuple[str, str], str] = {}  # (instance, trajectory id) -> the run it came from
    for path, source in distinct_files(inputs.paths, errors):
        verdicts = load_verdicts(reports[source], str(reports[source]), errors)
        named = run_name(Path(path))
        if Path(path).is_dir():
            path, source = _predictions_in(Path(path), source, errors)
            if path is None:
                continue
        for where, line, item, suspicious in json_items(path, source, errors):
            fields = Fields(item, where, line, errors)
            instance_id = fields.text("instance_id")
            model = fields.text("model_name_or_path")
            patch = fields.text("model_patch", required=False)  # null: the model gave none
            if not fields.ok:
                continue
            run = named if inputs.name_by_run else model
            earlier = first_run.setdefault((instance_id, run), source)
            if earlier != source and not inputs.name_by_run:
                errors.add(where, line, "model_name_or_path",
                           f"{model!r} of instance {instance_id!r} is also in {earlier}: for several runs of one "
                           "model, name each trajectory by its run (--name-by-run)")
                continue
            reward = reward_of(verdicts, instance_id, patch)
            if isinstance(reward, str):
                notes.skip(reward, f"{run}/{instance_id}")
                continue
            record = {"group_id": instance_id, "trajectory_id": run, "reward": reward, "patch": patch,
                      "meta": {key: value for key, value in item.items() if key not in _READ}}
            tasks.add_to(record, instance_id, where, line)
            yield where, line, record, suspicious


def run_name(path: Path) -> str:
    """A run's name: its folder's, for a run folder or a file named as a run's predictions
    (``all_preds.jsonl``, ``preds.json``); else the file's name up to its first dot."""
    path = path.resolve()
    if path.is_dir():
        return path.name
    if path.name in PREDICTION_FILES:
        return path.parent.name
    return path.name.split(".")[0]


def _predictions_in(folder: Path, source: str, errors: ErrorLog) -> tuple[Path | None, str]:
    """The one predictions file of a run folder."""
    found = [name for name in PREDICTION_FILES if (folder / name).is_file()]
    if len(found) != 1:
        reason = "holds both" if found else "holds neither"
        errors.add(source, None, "file", f"a run folder must hold one predictions file; it {reason} "
                   f"{' nor '.join(PREDICTION_FILES) if not found else ' and '.join(found)}")
        return None, source
    path, source = folder / found[0], f"{source}/{found[0]}"
    return (path if inside(folder, path, source, errors, what="run") else None), source
