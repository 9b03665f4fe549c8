"""Small files in each format the importers read, written by the tests (never copies of real runs)."""

import json
import zipfile
from pathlib import Path


def patch_for(instance: str, run: str) -> str:
    return (f"diff --git a/{instance}.py b/{instance}.py\n--- a/{instance}.py\n+++ b/{instance}.py\n"
            f"@@ -1 +1 @@\n-old\n+{run}\n")


def write_json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def write_lines(path: Path, items) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items))
    return path


def swebench_run(folder: Path, run: str, outcomes: dict[str, bool | None], *, report: str = "harness",
                 empty: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A predictions file and its report for one run: instance -> resolved (None: the report
    has no verdict); `empty` instances have no patch. `report`: harness, results or
    per-instance (a folder of report.json)."""
    predictions = [{"instance_id": i, "model_name_or_path": run,
                    "model_patch": "" if i in empty else patch_for(i, run)} for i in [*outcomes, *empty]]
    preds = write_lines(folder / run / "all_preds.jsonl", predictions)
    judged = {i: ok for i, ok in outcomes.items() if ok is not None}
    if report == "harness":
        path = write_json(folder / run / f"{run}.eval.json", {
            "resolved_ids": [i for i, ok in judged.items() if ok],
            "unresolved_ids": [i for i, ok in judged.items() if not ok],
            "empty_patch_ids": list(empty), "error_ids": [], "schema_version": 2})
    elif report == "results":
        path = write_json(folder / run / "results" / "results.json", {
            "generated": list(judged), "resolved": [i for i, ok in judged.items() if ok],
            "no_generation": list(empty)})
    else:
        path = folder / run / "logs"
        for i, ok in judged.items():
            write_json(path / i / "report.json", {i: {"patch_is_None": False, "patch_exists": True,
                                                      "resolved": ok}})
    return preds, path


def swebench_tasks(path: Path, instances) -> Path:
    return write_lines(path, [{"instance_id": i, "problem_statement": f"Fix {i}.", "repo": "o/r",
                               "base_commit": "abc", "patch": patch_for(i, "gold"), "version": "1.0"}
                              for i in instances])


def verl_line(step: int, prompt: str, output: str, score: float, **extra) -> dict:
    return {"input": prompt, "output": output, "score": score, "step": step, **extra}


def zip_folders(path: Path, folder: Path) -> Path:
    """A .zip of everything under `folder`, named relative to it."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(folder).as_posix())
    return path
