"""SWE-bench evaluation reports: per instance, resolved (True), unresolved (False) or why
there is no verdict (a skip reason). Read by content, in these shapes:

- the harness's run report, ``<model>.<run_id>.json`` (swebench/harness/reporting.py,
  ``make_run_report``; OpenHands writes the same as ``report.json`` or
  ``output.report.json``, sb-cli as its report): ``resolved_ids``, ``unresolved_ids``,
  ``empty_patch_ids``, ``error_ids``, ...;
- the per-instance ``report.json`` of ``logs/run_evaluation/<run_id>/<model>/<instance>/``
  (swebench/harness/grading.py, ``get_eval_report``; OpenHands' ``eval_outputs/<instance>/``):
  ``{instance_id: {"resolved": bool, "patch_is_None", "patch_exists", ...}}``; a folder is
  read as all the ``report.json`` files below it;
- ``results/results.json`` of the SWE-bench experiments repository, lists by outcome. The
  older shape (harness 1.x, ``get_model_report``) has ``generated``, ``applied``,
  ``resolved``, ``no_generation``, ``install_fail``, ...; the newer one only ``resolved``,
  ``no_generation`` and ``no_logs``, and the repository counts every other instance of the
  run as unresolved, as this reader does;
- JSON Lines (by the name), a row per instance: OpenHands' ``output.swebench_eval.jsonl``
  (evaluation/benchmarks/swe_bench/eval_infer.py) with the verdict in
  ``test_result.report``, or an ``output.jsonl`` that
  ``scripts/eval/update_output_with_eval.py`` gave a top-level ``report``:
  ``{"resolved", "empty_generation", "failed_apply_patch", "error_eval", "test_timeout"}``.
  A patch that did not apply is unresolved; an evaluation that failed or timed out gives
  no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grading.formats.files import Fields, inside, load_json
from grading.jsonl import ErrorLog, json_kind, read_json_lines

EMPTY_PATCH = "empty patch"
NO_VERDICT = "no verdict in the evaluation report"
EVALUATION_ERROR = "evaluation error, no verdict"

Verdict = bool | str  # resolved, or the reason there is none

# Older results.json lists whose instances ran and were not resolved: a failing verdict.
_TRIED = ("generated", "applied", "with_logs", "no_apply", "test_errored", "test_timeout")


@dataclass
class Verdicts:
    """A report's verdict per instance, and what an instance it does not name gets."""

    by_instance: dict[str, Verdict] = field(default_factory=dict)
    unnamed: Verdict = NO_VERDICT

    def of(self, instance_id: str) -> Verdict:
        return self.by_instance.get(instance_id, self.unnamed)


def load_verdicts(path: str | Path, source: str, errors: ErrorLog) -> Verdicts:
    if Path(path).is_dir():
        verdicts = Verdicts()
        files = sorted(Path(path).rglob("report.json"))
        if not files:
            errors.add(source, None, "report", "folder holds no report.json")
        for file in files:
            where = f"{source}/{file.relative_to(path)}"
            if inside(path, file, where, errors, what="report"):
                verdicts.by_instance.update(_file_verdicts(file, where, errors).by_instance)
        return verdicts
    if str(path).lower().endswith(".jsonl"):
        return _row_verdicts(Path(path), source, errors)
    return _file_verdicts(path, source, errors)


def _row_verdicts(path: Path, source: str, errors: ErrorLog) -> Verdicts:
    verdicts = Verdicts()
    for line, row, _ in read_json_lines(path, source, errors):
        fields = Fields(row, source, line, errors)
        instance_id = fields.text("instance_id")
        if isinstance(row.get("report"), dict):  # an output.jsonl updated with its evaluation
            report, prefix = row["report"], "report."
        else:
            test_result = fields.mapping("test_result")
            report = None if test_result is None else fields.mapping(
                "report", within=test_result, prefix="test_result.")
            prefix = "test_result.report."
        resolved = None if report is None else fields.get(
            "resolved", bool, "true or false", within=report, prefix=prefix)
        if not fields.ok:
            continue
        if report.get("empty_generation") is True:
            verdicts.by_instance[instance_id] = EMPTY_PATCH
        elif report.get("error_eval") is True or report.get("test_timeout") is True:
            verdicts.by_instance[instance_id] = EVALUATION_ERROR
        else:
            verdicts.by_instance[instance_id] = resolved
    return verdicts


def _file_verdicts(path, source: str, errors: ErrorLog) -> Verdicts:
    loaded = load_json(path, source, errors)
    if loaded is None:
        return Verdicts()
    report = loaded[0]
    if not isinstance(report, dict):
        errors.add(source, None, "report", f"must be a JSON object, got {json_kind(report)}")
        return Verdicts()
    if "resolved_ids" in report:
        return Verdicts(_lists(report, source, errors, {
            "resolved_ids": True, "unresolved_ids": False,
            "empty_patch_ids": EMPTY_PATCH, "error_ids": EVALUATION_ERROR,
        }, required=("resolved_ids", "unresolved_ids")))
    if isinstance(report.get("resolved"), list):
        return _results_json(report, source, errors)
    if report and all(isinstance(v, dict) and "resolved" in v for v in report.values()):
        return Verdicts(_per_instance(report, source, errors))
    errors.add(source, None, "report", "not a SWE-bench evaluation report: expected resolved_ids "
               "(harness run report), a resolved list (results.json) or "
               "{instance_id: {resolved: ...}} (per-instance report.json)")
    return Verdicts()


def _results_json(report: dict, source: str, errors: ErrorLog) -> Verdicts:
    verdicts = _lists(report, source, errors, {
        "resolved": True, "no_generation": EMPTY_PATCH, "no_logs": EVALUATION_ERROR,
        "install_fail": EVALUATION_ERROR, "reset_failed": EVALUATION_ERROR,
    }, required=("resolved",))
    if "generated" not in report:  # the newer shape: the rest of the run is unresolved
        return Verdicts(verdicts, unnamed=False)
    for key in _TRIED:
        for instance_id in _ids(report, key, source, errors):
            verdicts.setdefault(instance_id, False)
    return Verdicts(verdicts)


def _lists(report: dict, source: str, errors: ErrorLog, meanings: dict[str, Verdict],
           *, required: tuple[str, ...]) -> dict[str, Verdict]:
    """The first list naming an instance decides: ``meanings`` is in that order."""
    for key in required:
        if key not in report:
            errors.add(source, None, key, "missing")
    verdicts: dict[str, Verdict] = {}
    for key, verdict in meanings.items():
        for instance_id in _ids(report, key, source, errors):
            verdicts.setdefault(instance_id, verdict)
    return verdicts


def _ids(report: dict, key: str, source: str, errors: ErrorLog) -> list[str]:
    ids = report.get(key, [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        errors.add(source, None, key, "must be an array of instance ids (strings)")
        return []
    return ids


def _per_instance(report: dict, source: str, errors: ErrorLog) -> dict[str, Verdict]:
    verdicts: dict[str, Verdict] = {}
    for instance_id, entry in report.items():
        if entry.get("patch_is_None") is True or entry.get("patch_exists") is False:
            verdicts[instance_id] = EMPTY_PATCH
        elif isinstance(entry["resolved"], bool):
            verdicts[instance_id] = entry["resolved"]
        else:
            errors.add(source, None, f"{instance_id}.resolved",
                       f"must be true or false, got {json_kind(entry['resolved'])}")
    return verdicts


def reward_of(verdicts: Verdicts, instance_id: str, patch: str | None) -> float | str:
    """1.0 or 0.0 by the report's verdict on `patch`, or the reason there is none (a skip):
    an empty patch, or no verdict."""
    if not patch:
        return EMPTY_PATCH
    verdict = verdicts.of(instance_id)
    if isinstance(verdict, str):
        return verdict
    return 1.0 if verdict else 0.0
