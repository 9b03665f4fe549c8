"""Fixtures for the agentic grader's tests: a tiny local model, sample groups, a test server.

A test module re-exports the fixtures it uses (`tiny_model = agentic_fixtures.tiny_model`);
the fixtures are idempotent, so modules that each register one still share the model,
built from scratch once per session into the session's base temp folder. Nothing is
downloaded.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest

from grading.cases import GroupCase, TrajectoryCase
from grading.rollouts import load_rollouts

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SAMPLE = Path(__file__).resolve().parents[2] / "sample" / "rollouts.jsonl"


def groups_from_rollouts(rollouts) -> list[GroupCase]:
    """GroupCases in file order, the statement taken from the line that carries the task."""
    by_group = defaultdict(list)
    for rollout in rollouts:
        by_group[rollout.group_id].append(rollout)
    groups = []
    for group_id, members in by_group.items():
        task = next((r.task for r in members if r.task), None)
        groups.append(GroupCase(
            group_id=group_id,
            statement=task.statement if task else "",
            repo=task.repo if task else "",
            trajectories=tuple(
                TrajectoryCase(trajectory_id=r.trajectory_id, passed=r.passed, reward=r.reward,
                               patch=r.patch, messages=r.messages, tests=r.tests,
                               metrics=r.metrics)
                for r in members),
        ))
    return groups


def patch(path: str, old: str, new: str, line: int = 1) -> str:
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -{line},1 +{line},1 @@\n-{old}\n+{new}\n")


def make_group(group_id: str = "g1", passed=(True, True, False), patches=None,
               messages=None, statement: str = "Fix the bug.") -> GroupCase:
    """A small inline group: trajectory ids t1..tn, one changed line each unless given."""
    trajectories = []
    for i, ok in enumerate(passed, start=1):
        text = patches[i - 1] if patches else patch("pkg/mod.py", "return x", f"return x + {i}")
        turns = messages[i - 1] if messages else [
            {"role": "user", "content": statement},
            {"role": "assistant", "content": f"I will edit pkg/mod.py (attempt {i})",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
            {"role": "tool", "content": "pkg\ntests", "tool_call_id": "c1"},
        ]
        trajectories.append(TrajectoryCase(
            trajectory_id=f"t{i}", passed=ok, reward=1.0 if ok else 0.0, patch=text,
            messages=turns, tests={"passed": ["tests/test_mod.py::test_f"] if ok else [],
                                   "failed": [] if ok else ["tests/test_mod.py::test_f"],
                                   "log": "collected 1 item\n" + ("1 passed" if ok else "1 failed")},
            metrics={"num_turns": len(turns), "output_tokens": 100 * i}))
    return GroupCase(group_id=group_id, statement=statement, repo="o/r",
                     trajectories=tuple(trajectories))


@pytest.fixture(scope="session")
def sample_groups() -> list[GroupCase]:
    return groups_from_rollouts(load_rollouts([SAMPLE]))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    pytest.importorskip("transformers",
                        reason="the tiny model needs the llm extra: make install-llm (make test has it)")
    from grading.tiny_model import build_tiny_model

    path = tmp_path_factory.getbasetemp() / "tiny-model"
    if not (path / "tokenizer.json").exists():  # written last
        build_tiny_model(path)
    return path


@pytest.fixture(scope="session")
def tiny_backend(tiny_model):
    pytest.importorskip("xgrammar",
                        reason="constrained decoding needs xgrammar: make install-llm (make test has it)")
    from grading.backends import load_backend

    # One thread: on a busy 2-core machine, torch's second thread mostly waits at barriers.
    return load_backend("transformers", model=str(tiny_model), threads=1)


@pytest.fixture(scope="session")
def openai_url(tiny_backend):
    """An OpenAI-compatible server on 127.0.0.1 (a free port) over the tiny model."""
    from tests.openai_server import serve

    server, thread = serve(tiny_backend, host="127.0.0.1", port=0)
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    thread.join(timeout=5)
    server.server_close()
