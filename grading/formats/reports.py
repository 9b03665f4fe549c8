"""SWE-bench evaluation reports: per instance, resolved (True), unresolved (False) or why
there is no verdict (a skip reason). Read by content, in three shapes:

- the harness's run report, ``<model>.<run_id>.json`` (swebench/harness/reporting.py,
  ``make_run_report``; OpenHands' eval_infer writes the same as ``report.json``):
  ``resolved_ids``, ``unresolved_ids``, ``empty_patch_ids``, ``error_ids``, ...;
- the per-instance ``report.json`` of ``logs/run_evaluation/<run_id>/<model>/<instance>/``
  (swebench/harness/grading.py, ``get_eval_report``): ``{instance_id: {"resolved": bool,
  "patch_is_None", "patch_exists", ...}}``; a folder is read as all the ``report.json``
  files below it;
- the older ``results/results.json`` of the SWE-bench experiments repository: lists by
  outcome, ``resolved``, ``generated``, ``no_generation``, ``install_fail``, ...;
- OpenHands' ``output.swebench_eval.jsonl`` (evaluation/benchmarks/swe_bench/eval_infer.py,
  ``process_instance``), read as JSON Lines by its name: a row per instance,
  ``{"instance_id", "test_result": {"report": {"resolved", "empty_generation",
  "failed_apply_patch", "error_eval", "test_timeout"}, ...}}``. A patch that did not apply
  is unresolved; an evaluation that failed or timed out gives no verdict.
"""

from __future__ import annotations

from pathlib import Path

from grading.formats.files import Fields, load_json
from grading.jsonl import ErrorLog, json_kind, read_json_lines
from grading.rollouts import MAX_LINE_BYTES

EMPTY_PATCH = "empty patch"
NO_VERDICT = "no verdict in the evaluation report"
EVALUATION_ERROR = "evaluation error, no verdict"

Verdict = bool | str  # resolved, or the reason there is none

# results.json lists whose instances ran and were not resolved: a failing verdict.
_TRIED = ("generated", "applied", "with_logs", "no_apply", "test_errored", "test_timeout")


def load_verdicts(path: str | Path, source: str, errors: ErrorLog) -> dict[str, Verdict]:
    if Path(path).is_dir():
        verdicts: dict[str, Verdict] = {}
        files = sorted(Path(path).rglob("report.json"))
        if not files:
            errors.add(source, None, "report", "folder holds no report.json")
        for file in files:
            verdicts.update(_file_verdicts(file, f"{source}/{file.relative_to(path)}", errors))
        return verdicts
    if str(path).lower().endswith(".jsonl"):
        return _eval_output_verdicts(Path(path), source, errors)
    return _file_verdicts(path, source, errors)


def _eval_output_verdicts(path: Path, source: str, errors: ErrorLog) -> dict[str, Verdict]:
    verdicts: dict[str, Verdict] = {}
    for line, row, _ in read_json_lines(path, source, errors, MAX_LINE_BYTES):
        fields = Fields(row, source, line, errors)
        instance_id = fields.text("instance_id")
        test_result = fields.mapping("test_result")
        report = None if test_result is None else fields.mapping(
            "report", within=test_result, prefix="test_result.")
        resolved = None if report is None else fields.get(
            "resolved", bool, "true or false", within=report, prefix="test_result.report.")
        if not fields.ok:
            continue
        if report.get("empty_generation") is True:
            verdicts[instance_id] = EMPTY_PATCH
        elif report.get("error_eval") is True or report.get("test_timeout") is True:
            verdicts[instance_id] = EVALUATION_ERROR
        else:
            verdicts[instance_id] = resolved
    return verdicts


def _file_verdicts(path, source: str, errors: ErrorLog) -> dict[str, Verdict]:
    loaded = load_json(path, source, errors)
    if loaded is None:
        return {}
    report = loaded[0]
    if not isinstance(report, dict):
        errors.add(source, None, "report", f"must be a JSON object, got {json_kind(report)}")
        return {}
    if "resolved_ids" in report:
        return _lists(report, source, errors, {
            "resolved_ids": True, "unresolved_ids": False,
            "empty_patch_ids": EMPTY_PATCH, "error_ids": EVALUATION_ERROR,
        }, required=("resolved_ids", "unresolved_ids"))
    if "resolved" in report and isinstance(report["resolved"], list):
        verdicts = _lists(report, source, errors, {
            "resolved": True, "no_generation": EMPTY_PATCH,
            "install_fail": EVALUATION_ERROR, "reset_failed": EVALUATION_ERROR,
        }, required=("resolved", "generated"))
        for key in _TRIED:
            for instance_id in _ids(report, key, source, errors):
                verdicts.setdefault(instance_id, False)
        return verdicts
    if report and all(isinstance(v, dict) and "resolved" in v for v in report.values()):
        return _per_instance(report, source, errors)
    errors.add(source, None, "report", "not a SWE-bench evaluation report: expected resolved_ids "
               "(harness run report), resolved and generated lists (results.json) or "
               "{instance_id: {resolved: ...}} (per-instance report.json)")
    return {}


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


def reward_of(verdicts: dict[str, Verdict], instance_id: str, patch: str) -> float | str:
    """1.0 or 0.0 by the report's verdict on `patch`, or the reason there is none (a skip):
    an empty patch, or no verdict."""
    if not patch:
        return EMPTY_PATCH
    verdict = verdicts.get(instance_id, NO_VERDICT)
    if isinstance(verdict, str):
        return verdict
    return 1.0 if verdict else 0.0
