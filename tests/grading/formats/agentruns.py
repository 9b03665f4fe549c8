"""Run folders of SWE-agent, mini-swe-agent and OpenHands, laid out and shaped as each
version writes them (keys, nesting, file names), with invented contents: never copies of
real runs. Each writer names the code whose output it imitates."""

import json
from pathlib import Path

from tests.grading.formats.formatfiles import patch_for, write_json, write_lines

STATS = {"instance_cost": 0.5, "tokens_sent": 900, "tokens_received": 80, "api_calls": 2}


def _patch(path: Path, submission):
    return patch_for(path.name.split(".")[0], path.parent.name) if submission == "patch" else submission


def swe_agent_traj(path: Path, instance: str | None = None, *, submission="patch", mini=False) -> Path:
    """A SWE-agent 0.x .traj, or a mini-swe-agent 1.x .traj.json with `mini` (see below)."""
    if mini:
        return mini_swe_agent_traj(path, instance or path.name.split(".")[0], submission=submission)
    return swe_agent_0_traj(path, submission=submission)


def swe_agent_0_traj(path: Path, *, submission="patch") -> Path:
    """SWE-agent 0.x (sweagent/agent/agents.py, `save_trajectory`): `<run>/<instance>.traj`.
    The history holds a demonstration (`is_demo`), the model's turns (`thought`, `action`,
    the raw output as `content`) and observations as user messages; `info` has no
    `submission` when the agent exited without one (submission=None)."""
    info = {"exit_status": "submitted", "model_stats": {"total_cost": 12.5, **STATS}}
    if submission is not None:
        info |= {"submission": _patch(path, submission), "edited_files30": "Empty. No edited files found."}
    else:
        info["exit_status"] = "early_exit"
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer.", "agent": "primary"},
        {"role": "user", "content": "Here is a demonstration of another task.", "agent": "primary", "is_demo": True},
        {"role": "user", "content": "We're currently solving the following issue.", "agent": "primary"},
        {"role": "assistant", "content": "Look around.\n```\nls\n```", "thought": "Look around.", "action": "ls\n",
         "agent": "primary"},
        {"role": "user", "content": "a.py\n(Open file: n/a)\nbash-$", "agent": "primary"},
        {"role": "assistant", "content": "Submit.\n```\nsubmit\n```", "thought": "Submit.", "action": "submit\n",
         "agent": "primary"},
    ]
    trajectory = [
        {"action": "ls\n", "observation": "a.py", "response": "Look around.\n```\nls\n```",
         "state": '{"open_file": "n/a", "working_dir": "/o__r"}', "thought": "Look around."},
        {"action": "submit\n", "observation": "diff", "response": "Submit.\n```\nsubmit\n```",
         "state": '{"open_file": "n/a", "working_dir": "/o__r"}', "thought": "Submit."},
    ]
    return write_json(path, {"environment": "swe_main", "trajectory": trajectory, "history": history, "info": info})


def swe_agent_1_traj(run: Path, instance: str, *, submission="patch", attempts: int = 0) -> Path:
    """SWE-agent 1.x (sweagent/agent/agents.py, `get_trajectory_data`; sweagent/run/run_batch.py):
    `<run>/<instance>/<instance>.traj` beside `<instance>.pred` and logs, function calling:
    assistant turns carry `tool_calls`, observations are `tool` messages with
    `tool_call_ids`. With `attempts`, a RetryAgent's run: each attempt's own .traj in
    `attempt_<n>/` and the chosen one, with `attempts`, in the instance's file."""
    folder = run / instance
    patch = patch_for(instance, run.name) if submission == "patch" else submission
    calls = [{"id": f"call_{instance}_{n}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
             for n, command in enumerate(["ls", "submit"])]
    history = [
        {"role": "system", "content": "You are a helpful assistant.", "agent": "main", "message_type": "system_prompt"},
        {"role": "user", "content": [{"type": "text", "text": f"<pr_description>Fix {instance}.</pr_description>"}],
         "agent": "main", "message_type": "observation"},
        {"role": "assistant", "content": "Look around.", "thought": "Look around.", "action": "ls", "agent": "main",
         "tool_calls": [calls[0]], "message_type": "action", "thinking_blocks": []},
        {"role": "tool", "content": "OBSERVATION:\na.py", "agent": "main", "message_type": "observation",
         "tool_call_ids": [calls[0]["id"]]},
        {"role": "assistant", "content": "Done.", "thought": "Done.", "action": "submit", "agent": "main",
         "tool_calls": [calls[1]], "message_type": "action", "thinking_blocks": []},
        {"role": "tool", "content": "OBSERVATION:\ndiff", "agent": "main", "message_type": "observation",
         "tool_call_ids": [calls[1]["id"]]},
    ]
    trajectory = [{"action": action, "observation": "a.py", "response": "Look around.", "thought": "Look around.",
                   "execution_time": 0.1, "state": {"working_dir": "/testbed", "diff": ""},
                   "query": [{"role": "system", "content": "You are a helpful assistant."}], "extra_info": {}}
                  for action in ("ls", "submit")]
    info = {"swe_agent_hash": "0" * 40, "swe_agent_version": "1.1.0", "swe_rex_version": "1.2.0",
            "swe_rex_hash": "unavailable", "submission": patch, "exit_status": "submitted",
            "edited_files30": "", "edited_files50": "", "edited_files70": "", "model_stats": STATS}
    data = {"trajectory": trajectory, "history": history, "info": info,
            "replay_config": json.dumps({"env": {"deployment": {"type": "docker"}}}), "environment": "main"}
    for n in range(attempts):
        write_json(folder / f"attempt_{n}" / f"{instance}.traj", data)
    if attempts:
        data = {"attempts": [data] * attempts, **data, "info": {**info, "best_attempt_idx": 0}}
    write_json(folder / f"{instance}.pred", {"model_name_or_path": run.name, "instance_id": instance,
                                            "model_patch": patch})
    (folder / f"{instance}.debug.log").write_text("INFO run\n")
    return write_json(folder / f"{instance}.traj", data)


def mini_swe_agent_traj(path: Path, instance: str, *, submission="patch", version: str = "1") -> Path:
    """mini-swe-agent (minisweagent/run/extra/swebench.py, `save_traj`; v2: `Agent.save`):
    `<run>/<instance>/<instance>.traj.json` with `instance_id`. `version`: "1" (text
    actions, observations as user messages), "2" (tool calls, `tool` messages, an `exit`
    message, `extra` on each) or "2-responses" (v2 on the Responses API: whole responses
    and `function_call_output` items)."""
    patch = _patch(path, submission)
    messages = [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
                {"role": "user", "content": f"<pr_description>Fix {instance}.</pr_description>"}]
    if version == "1":
        messages += [{"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls\n```"},
                     {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"}]
    elif version == "2":
        call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call],
                      "extra": {"actions": [{"command": "ls", "tool_call_id": "call_1"}], "cost": 0.01}},
                     {"role": "tool", "tool_call_id": "call_1", "content": "<returncode>0</returncode>\na.py",
                      "extra": {"returncode": 0, "timestamp": 1.0}},
                     {"role": "exit", "content": patch or "",
                      "extra": {"exit_status": "Submitted", "submission": patch}}]
    else:
        messages += [{"object": "response", "id": "resp_1", "model": "gpt-x", "output": [
                         {"type": "reasoning", "id": "rs_1", "summary": []},
                         {"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": "Look."}]},
                         {"type": "function_call", "call_id": "call_1", "name": "bash",
                          "arguments": '{"command": "ls"}'}],
                      "extra": {"actions": [{"command": "ls", "tool_call_id": "call_1"}], "cost": 0.01}},
                     {"type": "function_call_output", "call_id": "call_1", "output": "a.py",
                      "extra": {"returncode": 0}}]
    info = {"exit_status": "Submitted", "submission": patch,
            "model_stats": {"instance_cost": 0.5, "api_calls": 2},
            "mini_version": "1.9.0" if version == "1" else "2.0.0", "config": {"agent": {"step_limit": 250}}}
    return write_json(path, {"info": info, "messages": messages, "instance_id": instance,
                             "trajectory_format": "mini-swe-agent-1" if version == "1" else "mini-swe-agent-1.1"})


def experiments_run(folder: Path, outcomes: dict[str, bool | None], *, empty: tuple[str, ...] = ()) -> Path:
    """A run of the SWE-bench experiments repository, `evaluation/<split>/<run>/`:
    `all_preds.jsonl`, `results/results.json` in its newer shape (`resolved`,
    `no_generation`, `no_logs`; every other instance unresolved), `trajs/<instance>.traj`
    (SWE-agent 0.x) and `logs/<instance>/report.json`. outcomes: instance -> resolved, or
    None for an instance the evaluation left without logs."""
    run = folder.name
    write_lines(folder / "all_preds.jsonl", [
        {"model_name_or_path": run, "instance_id": i, "model_patch": None if i in empty else patch_for(i, run)}
        for i in [*outcomes, *empty]])
    write_json(folder / "results" / "results.json", {
        "no_generation": list(empty), "no_logs": [i for i, ok in outcomes.items() if ok is None],
        "resolved": [i for i, ok in outcomes.items() if ok]})
    for i, ok in outcomes.items():
        swe_agent_0_traj(folder / "trajs" / f"{i}.traj")
        if ok is not None:
            write_json(folder / "logs" / i / "report.json", {i: {
                "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": ok,
                "tests_status": {"FAIL_TO_PASS": {"success": [], "failure": []}}}})
    (folder / "README.md").write_text("# A made-up run\n")
    return folder


def harness_run_report(path: Path, resolved=(), unresolved=(), *, empty=(), error=(), incomplete=()) -> Path:
    """The harness's run report (swebench/harness/reporting.py, `make_run_report`)."""
    submitted = [*resolved, *unresolved, *empty, *error]
    return write_json(path, {
        "total_instances": len(submitted) + len(incomplete), "submitted_instances": len(submitted),
        "completed_instances": len(resolved) + len(unresolved), "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved), "empty_patch_instances": len(empty),
        "error_instances": len(error), "completed_ids": [*resolved, *unresolved], "incomplete_ids": list(incomplete),
        "empty_patch_ids": list(empty), "submitted_ids": submitted, "resolved_ids": list(resolved),
        "unresolved_ids": list(unresolved), "error_ids": list(error), "schema_version": 2})


def _instance(instance: str) -> dict:
    return {"instance_id": instance, "problem_statement": f"Fix {instance}.", "repo": "o/r",
            "base_commit": "abc", "patch": patch_for(instance, "gold"), "FAIL_TO_PASS": "[]"}


def openhands_row(instance: str, run: str, *, patch=None) -> dict:
    """An OpenHands 0.9+ output.jsonl row (evaluation/benchmarks/swe_bench/run_infer.py,
    `EvalOutput`): the event stream with a user message, a command and its observation."""
    return {
        "instance_id": instance, "instruction": "Fix it.", "instance": _instance(instance),
        "test_result": {"git_patch": patch_for(instance, run) if patch is None else patch},
        "metadata": {"agent_class": "CodeActAgent", "max_iterations": 30},
        "metrics": {"accumulated_cost": 0.25, "costs": []},
        "error": None,
        "history": [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix it."}, "message": "Fix it."},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "Look."},
             "message": "Running command: ls"},
            {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "cause": 1, "extras": {}},
        ],
    }


def openhands_0_3x_row(instance: str, run: str) -> dict:
    """A later 0.x row: the system prompt as a `system` action, function-calling metadata,
    agent-state events in the history, token usage in the metrics."""
    row = openhands_row(instance, run)
    row["metrics"] = {"accumulated_cost": 0.25, "accumulated_token_usage": {
        "model": "m", "prompt_tokens": 900, "completion_tokens": 80, "cache_read_tokens": 0}, "costs": []}
    call = {"function_name": "execute_bash", "tool_call_id": "toolu_1", "total_calls_in_response": 1}
    row["history"] = [
        {"id": 0, "source": "agent", "action": "system", "message": "You are OpenHands agent.",
         "args": {"content": "You are OpenHands agent.", "tools": [{"type": "function"}],
                  "agent_class": "CodeActAgent"}},
        {"id": 1, "source": "user", "action": "message", "message": "Fix it.",
         "args": {"content": "Fix it.", "image_urls": None, "wait_for_response": False}},
        {"id": 2, "source": "environment", "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running"}, "message": "State changed"},
        {"id": 3, "source": "agent", "action": "run", "message": "Running command: ls",
         "args": {"command": "ls", "is_input": False, "thought": "Look.", "blocking": False},
         "tool_call_metadata": call},
        {"id": 4, "source": "agent", "observation": "run", "content": "a.py", "cause": 3,
         "extras": {"command": "ls", "metadata": {"exit_code": 0}}, "tool_call_metadata": call},
        {"id": 5, "source": "agent", "action": "finish", "message": "Done.",
         "args": {"final_thought": "Done.", "outputs": {}, "thought": ""}},
    ]
    return row


def opendevin_row(instance: str, run: str, *, patch=None) -> dict:
    """An OpenDevin / OpenHands before 0.9 row (evaluation/swe_bench/run_infer.py):
    `git_patch` and `swe_instance` at the top level, history as [action, observation] pairs."""
    return {
        "instance_id": instance, "swe_instance": _instance(instance), "instruction": "Fix it.",
        "git_patch": patch_for(instance, run) if patch is None else patch,
        "metadata": {"agent_class": "CodeActAgent"}, "metrics": {"accumulated_cost": 0.1}, "error": None,
        "test_result": {"result": {}, "metadata": {}},
        "history": [
            [{"id": 0, "source": "user", "action": "message", "args": {"content": "Fix it."}, "message": "Fix it."},
             {"id": -1, "source": "user", "observation": "null", "content": "", "extras": {}, "message": ""}],
            [{"id": 1, "source": "agent", "action": "run", "args": {"command": "ls", "thought": ""},
              "message": "Running command: ls"},
             {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "cause": 1,
              "extras": {"command_id": -1, "command": "ls", "exit_code": 0}, "message": "Command `ls` executed"}],
        ],
    }


def openhands_v1_row(instance: str, run: str) -> dict:
    """An OpenHands V1 row (OpenHands/benchmarks, `EvalOutput` over software-agent-sdk events)."""
    text = lambda value: [{"type": "text", "text": value, "cache_prompt": False}]  # noqa: E731
    return {
        "instance_id": instance, "instruction": "Fix it.", "instance": _instance(instance),
        "test_result": {"git_patch": patch_for(instance, run)}, "error": None,
        "metadata": {"agent_class": "Agent", "max_iterations": 100},
        "metrics": {"accumulated_cost": 0.3,
                    "accumulated_token_usage": {"prompt_tokens": 700, "completion_tokens": 60}},
        "history": [
            {"kind": "SystemPromptEvent", "id": "e0", "source": "agent",
             "system_prompt": {"type": "text", "text": "You are OpenHands agent."}, "tools": []},
            {"kind": "MessageEvent", "id": "e1", "source": "user",
             "llm_message": {"role": "user", "content": text("Fix it.")}, "activated_skills": []},
            {"kind": "ActionEvent", "id": "e2", "source": "agent", "thought": text("Look."), "tool_name": "terminal",
             "tool_call_id": "toolu_1", "llm_response_id": "resp_1",
             "tool_call": {"id": "toolu_1", "name": "terminal", "arguments": '{"command": "ls"}',
                           "origin": "completion"},
             "action": {"kind": "TerminalAction", "command": "ls"}},
            {"kind": "ObservationEvent", "id": "e3", "source": "environment", "tool_name": "terminal",
             "tool_call_id": "toolu_1", "action_id": "e2",
             "observation": {"kind": "TerminalObservation", "content": text("a.py"), "is_error": False}},
            {"kind": "ConversationStateUpdateEvent", "id": "e4", "source": "environment", "key": "execution_status",
             "value": "finished"},
            {"kind": "AgentErrorEvent", "id": "e5", "source": "agent", "tool_name": "terminal",
             "tool_call_id": "toolu_2", "error": "bad arguments"},
        ],
    }


def openhands_eval_row(instance: str, resolved: bool, **flags) -> dict:
    """A row of OpenHands' output.swebench_eval.jsonl; `flags`: empty_generation, error_eval, ..."""
    report = {"empty_generation": False, "resolved": resolved, "failed_apply_patch": False,
              "error_eval": False, "test_timeout": False, **flags}
    return {"instance_id": instance, "test_result": {"apply_patch_output": "APPLY_PATCH_PASS", "report": report},
            "metadata": None, "history": None}
