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


def swe_agent_traj(path: Path, instance: str | None = None, *, submission="patch", mini=False) -> Path:
    """A SWE-agent .traj (two steps), or a mini-swe-agent .traj.json with `mini`."""
    patch = patch_for(path.name.split(".")[0], path.parent.name) if submission == "patch" else submission
    info = {"submission": patch, "exit_status": "submitted",
            "model_stats": {"instance_cost": 0.5, "api_calls": 2, "tokens_sent": 900, "tokens_received": 80}}
    if mini:
        data = {"info": info, "trajectory_format": "mini-swe-agent-1", "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "```bash\nls\n```"},
            {"role": "user", "content": "a.py"}]}
        if instance:
            data["instance_id"] = instance
    else:
        data = {"info": info, "history": [], "trajectory": [
            {"thought": "Look around.", "action": "ls", "observation": "a.py", "response": "ls"},
            {"thought": "Edit it.", "action": "edit 1:1\nnew\nend_of_edit", "observation": "done"}]}
    return write_json(path, data)


def openhands_row(instance: str, run: str, *, patch=None) -> dict:
    return {
        "instance_id": instance,
        "instance": {"instance_id": instance, "problem_statement": f"Fix {instance}.", "repo": "o/r",
                     "base_commit": "abc", "patch": patch_for(instance, "gold")},
        "test_result": {"git_patch": patch_for(instance, run) if patch is None else patch},
        "metrics": {"accumulated_cost": 0.25, "costs": []},
        "error": None,
        "history": [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix it."}, "message": "Fix it."},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "Look."},
             "message": "Running command: ls"},
            {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "cause": 1, "extras": {}},
        ],
    }


def verl_line(step: int, prompt: str, output: str, score: float, **extra) -> dict:
    return {"input": prompt, "output": output, "score": score, "step": step, **extra}


def openhands_eval_row(instance: str, resolved: bool, **flags) -> dict:
    """A row of OpenHands' output.swebench_eval.jsonl; `flags`: empty_generation, error_eval, ..."""
    report = {"empty_generation": False, "resolved": resolved, "failed_apply_patch": False,
              "error_eval": False, "test_timeout": False, **flags}
    return {"instance_id": instance, "test_result": {"apply_patch_output": "APPLY_PATCH_PASS", "report": report},
            "metadata": None, "history": None}


def zip_folders(path: Path, folder: Path) -> Path:
    """A .zip of everything under `folder`, named relative to it."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(folder).as_posix())
    return path
