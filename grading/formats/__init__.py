"""Formats teams already have, read into the records of the rollout format (docs/rollout-format.md).

Each adapter turns its files into ``(source, line, record, suspicious)`` tuples, the
same that the JSON Lines reader yields, and ``read_rollouts_from`` feeds them to the one
validator: errors, atomicity and idempotence are those of a JSONL import. An adapter
reports a problem with its own files by file, line and key (``runs/a.traj:
history[3].role: missing``), never guesses a reward, and records in ``ImportNotes`` what
it left out and why.

Runs and their evaluation reports pair by position: the n-th ``--report`` is the n-th
path's (``check_inputs`` says so when the counts differ).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grading.jsonl import ErrorLog
from grading.rollouts import Rollout, jsonl_records, validate_records

Record = tuple[str, int | None, dict, bool]  # source, line, rollout record, suspicious

SHOWN_IDS = 5  # ids a summary names per skip reason; the count covers them all


@dataclass(frozen=True)
class Inputs:
    """The files of one import, as the user named them."""

    paths: Sequence[str | Path]
    reports: Sequence[str | Path] = ()
    tasks: Sequence[str | Path] = ()
    # swebench: name each trajectory by its run (folder or file) instead of model_name_or_path,
    # for several runs of one model
    name_by_run: bool = False


@dataclass
class ImportNotes:
    """What an adapter left out (by reason: a count and the first ids) and how it read its
    files, for the import's summary."""

    skipped: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def skip(self, reason: str, item: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        shown = self.skipped.setdefault(reason, [])
        if len(shown) < SHOWN_IDS:
            shown.append(item)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def skip_lines(self) -> list[str]:
        """``skipped 3 (empty patch): a/x, b/y, ...``, a line per reason."""
        lines = []
        for reason, count in self.counts.items():
            shown = self.skipped[reason]
            more = ", ..." if count > len(shown) else ""
            lines.append(f"skipped {count} ({reason}): {', '.join(shown)}{more}")
        return lines

    def lines(self) -> list[str]:
        """The skip lines, then the notes."""
        return self.skip_lines() + self.notes

    def skipped_by_reason(self) -> dict[str, dict]:
        """reason -> {count, first}: the skips as the API answers them."""
        return {reason: {"count": count, "first": self.skipped[reason]} for reason, count in self.counts.items()}


@dataclass(frozen=True)
class Format:
    name: str
    read: Callable[[Inputs, ErrorLog, ImportNotes], Iterator[Record]]
    needs_reports: bool  # one evaluation report per path
    takes_tasks: bool  # a SWE-bench task file may give statements and reference patches
    runs_are_folders: bool  # a run is named by its folder: an upload sends an archive of run folders
    paths_are: str  # what each path is, for help and errors


def _read_jsonl(inputs: Inputs, errors: ErrorLog, notes: ImportNotes) -> Iterator[Record]:
    return jsonl_records(inputs.paths, errors)


def _formats() -> dict[str, Format]:
    from grading.formats import openhands, swe_agent, swebench, verl

    formats = [
        Format("jsonl", _read_jsonl, False, False, False, "rollout files (.jsonl, .jsonl.gz, .jsonl.zst)"),
        Format("swebench", swebench.read, True, True, False,
               "SWE-bench predictions files (.json or .jsonl) or the run folders holding "
               "all_preds.jsonl or preds.json, one per run"),
        Format("swe-agent", swe_agent.read, True, True, True,
               "SWE-agent or mini-swe-agent runs: a folder of .traj/.traj.json files, or one file"),
        Format("openhands", openhands.read, True, False, True,
               "OpenHands runs: an output.jsonl or the folder holding it, one per run"),
        Format("verl", verl.read, False, False, False, "verl rollout dumps ({step}.jsonl)"),
    ]
    return {f.name: f for f in formats}


FORMATS: dict[str, Format] = _formats()


def check_inputs(format_name: str, inputs: Inputs, errors: ErrorLog) -> None:
    """Record in ``errors`` why these inputs cannot be read in this format, if they cannot:
    an unknown format, or reports or tasks it does not take or needs."""
    fmt = FORMATS.get(format_name)
    if fmt is None:
        errors.add("--from", None, "format", f"unknown format {format_name!r}; "
                   f"known: {', '.join(FORMATS)}")
        return
    if fmt.needs_reports and len(inputs.reports) != len(inputs.paths):
        errors.add("--report", None, "report", f"format {fmt.name} needs one evaluation report "
                   f"per run, in the order of the runs: got {len(inputs.reports)} for "
                   f"{len(inputs.paths)} run{'' if len(inputs.paths) == 1 else 's'}")
    if not fmt.needs_reports and inputs.reports:
        errors.add("--report", None, "report", f"format {fmt.name} carries its rewards; "
                   "it takes no evaluation report")
    if not fmt.takes_tasks and inputs.tasks:
        errors.add("--tasks", None, "tasks", f"format {fmt.name} takes no task file")
    if len(inputs.tasks) > 1:
        errors.add("--tasks", None, "tasks", "give one task file")
    if inputs.name_by_run and fmt.name != "swebench":
        errors.add("--name-by-run", None, "name_by_run", f"format {fmt.name} names trajectories by their run "
                   "already; --name-by-run is for swebench")


def read_rollouts_from(format_name: str, inputs: Inputs, *, errors: ErrorLog, notes: ImportNotes,
                       pass_threshold: float) -> Iterator[Rollout]:
    """The valid rollouts of ``inputs`` read in ``format_name``; problems go to ``errors``,
    what was left out to ``notes``. Call ``check_inputs`` first."""
    records = FORMATS[format_name].read(inputs, errors, notes)
    return _not_all_skipped(validate_records(records, errors=errors, pass_threshold=pass_threshold),
                            inputs, errors, notes)


def _not_all_skipped(rollouts: Iterator[Rollout], inputs: Inputs, errors: ErrorLog,
                     notes: ImportNotes) -> Iterator[Rollout]:
    """The rollouts; an error if the adapter skipped every item, so that no empty batch is made."""
    imported = False
    for rollout in rollouts:
        imported = True
        yield rollout
    if not imported and notes.counts and not errors:
        skipped = "; ".join(notes.skip_lines())
        errors.add(str(inputs.paths[0]), None, "file", f"nothing to import, every item was skipped: {skipped}")
