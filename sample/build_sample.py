#!/usr/bin/env python3
"""Build sample/rollouts.jsonl and sample/evidence.jsonl: demo rollout groups set on the sample code base.

The data lives in files: sample/sample.toml (the repository and the prompts),
sample/codebase/ ("invoicekit", the repository the tasks are set on) and one file per
task in sample/tasks/ (statement, tests, reference fix, and each trajectory as steps). The
tasks of sample/evidence/ go to evidence.jsonl, their task records saying how to run their code
(rollout format v2): groups where running the candidates shows what the reward's tests miss.
This script replays every trajectory as tool calls (views, edits, commands) over a copy of
the code base; its patch is the real unified diff, computed with difflib, from the original
files to the files it ended with, so every patch applies with `git apply`. The evaluation
result of each trajectory (`tests`, `reward`) is what the task's hidden tests give on the
patched code base.

    python3 sample/build_sample.py            # (re)write sample/rollouts.jsonl
    python3 sample/build_sample.py --check    # exit 1 if the file differs from what is built
    python3 sample/build_sample.py --verify   # --check, then apply every patch and run the
                                              # tests and commands the file claims (git, pytest)

No randomness: the output depends only on the data files and the code in sample/samplegen/.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from samplegen.replay import Task
from samplegen.taskfiles import load_tasks
from samplegen.verify import verify

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "rollouts.jsonl"
OUTPUTS = {"tasks": OUTPUT, "evidence": HERE / "evidence.jsonl"}  # task folder -> the file built from it
DOC = HERE.parent / "docs" / "rollout-format.md"


def build_lines(tasks: list[Task]) -> list[str]:
    lines = []
    for task in tasks:
        for index, run in enumerate(task.runs):
            record = run.record(with_task=task.task_on_every_line or index == 0)
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return lines


def summary(lines: list[str]) -> str:
    groups: dict[str, list[dict]] = {}
    for line in lines:
        record = json.loads(line)
        groups.setdefault(record["group_id"], []).append(record)
    rows = [("group", "n", "pass", "task on", "variants (trajectory:variant:quality)")]
    for gid, recs in groups.items():
        passes = sum(r["reward"] == 1.0 for r in recs)
        on = "all" if all("task" in r for r in recs) else "first"
        variants = " ".join(
            f"{r['trajectory_id']}:{r['meta']['variant']}:{r['meta']['expected_quality'] or '-'}" for r in recs
        )
        rows.append((gid, str(len(recs)), str(passes), on, variants))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)) + "  " + row[4] for row in rows
    )


def check_doc_example(lines: list[str]) -> list[str]:
    """The example in docs/rollout-format.md is a shortened line of the file: its unshortened
    fields must still be what the file holds."""
    if not DOC.exists():
        return []
    block = re.search(r"```json\n(\{\n.*?\n\})\n```", DOC.read_text(encoding="utf-8"), re.S)
    if not block:
        return [f"{DOC.name}: no example found"]
    example = json.loads(block.group(1))
    records = {(r["group_id"], r["trajectory_id"]): r for r in map(json.loads, lines)}
    record = records.get((example["group_id"], example["trajectory_id"]))
    if record is None:
        return [f"{DOC.name}: the example's trajectory is not in {OUTPUT.name}"]
    keys = ("reward", "patch", "metrics", "meta", "sampling")
    problems = [f"{DOC.name}: example field {k!r} differs" for k in keys if example[k] != record[k]]
    if example["tests"]["passed"] != record["tests"]["passed"]:
        problems.append(f"{DOC.name}: example field 'tests.passed' differs")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    parser.add_argument("--verify", action="store_true", help="--check, then run git and pytest")
    parser.add_argument("--summary", action="store_true", help="print a table of the groups")
    args = parser.parse_args()
    status = 0
    for folder, output in OUTPUTS.items():
        tasks = load_tasks(HERE, folder)
        lines = build_lines(tasks)
        data = "".join(lines).encode("utf-8")
        if args.check or args.verify:
            if not output.exists() or output.read_bytes() != data:
                print(f"{output} is not what {Path(__file__).name} builds; run it again", file=sys.stderr)
                return 1
            for problem in check_doc_example(lines) if output == OUTPUT else ():
                print(problem, file=sys.stderr)
                return 1
        else:
            output.write_bytes(data)
        if args.summary or not (args.check or args.verify):
            print(summary(lines))
            print(f"{len(lines)} trajectories, {len(data)} bytes -> {output.relative_to(HERE.parent)}")
        if args.verify:
            verified = verify(tasks, lines)
            print(f"verify {output.name}:", "ok" if verified == 0 else "FAILED")
            status = status or verified
    return status


if __name__ == "__main__":
    sys.exit(main())
