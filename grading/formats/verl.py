"""verl's rollout dumps: the ``{step}.jsonl`` files that ``trainer.rollout_data_dir`` gets.

``RayPPOTrainer._dump_generations`` (verl/trainer/ppo/ray_trainer.py) writes one line per
sample: ``input`` and ``output`` (decoded text), ``score`` (the reward), ``step``, and the
reward function's extra keys (``acc``, ``pred``, ``gts``, ...). A dump has no group id:
samples are grouped by step and input, the group id being ``step-<step>/<first 12 hex of
the input's sha256>``, and a sample's trajectory id is ``<file name>:<line>``. The
reward is ``score``; the patch is empty (a dump holds text, not a diff), the transcript
is the input and the output, extra keys go to ``meta``, and the input is the group's task
statement.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from grading.formats import ImportNotes, Inputs, Record
from grading.formats.files import Fields
from grading.jsonl import ErrorLog
from grading.rollouts import jsonl_records

GROUPING = "verl: a dump has no group id; grouped by step and input (group id step-<step>/<sha256 of input, 12 hex>)"
_READ = ("input", "output", "score", "step")


def group_id(step: int, text: str) -> str:
    return f"step-{step}/{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def read(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    notes.note(GROUPING)
    tasked: set[str] = set()
    for source, line, item, suspicious in jsonl_records(inputs.paths, errors):
        fields = Fields(item, source, line, errors)
        text = fields.text("input")
        output = fields.text("output")
        score = fields.number("score")
        step = fields.get("step", int, "an integer")
        if not fields.ok:
            continue
        group = group_id(step, text)
        record = {"group_id": group, "trajectory_id": f"{Path(source).name}:{line}", "reward": score,
                  "patch": "", "messages": [{"role": "user", "content": text},
                                            {"role": "assistant", "content": output}],
                  "meta": {key: value for key, value in item.items() if key not in _READ}}
        if group not in tasked:
            record["task"] = {"id": group, "statement": text}
            tasked.add(group)
        yield source, line, record, suspicious
