"""Score one step's groups with a verifiers Rubric holding GAGAR's group reward function, with
verifiers' own code (docs/training.md).

    GAGAR_TOKEN=... .venv-verl/bin/python examples/verifiers_rubric.py examples/verl_step.json [key=value ...]

The step (JSON `samples` of `index`, `prompt`, `response`, `ground_truth`) becomes one
verifiers state per response, as a rollout leaves it: the prompt and completion as chat
messages, the example's id, its answer. Each example's states are scored together by
`Rubric.score_group`, every group at once, as `Environment.generate` scores a batch of
groups. `key=value` arguments override the rubric's options (`url`, `run`, `group_size`,
`deadline`, ...). Prints each state's reward and advantage, as verifiers set them, as JSON.
In an environment: `vf.SingleTurnEnv(dataset=..., rubric=gagar_rubric(**RUBRIC))`.
"""

import asyncio
import json
import sys

import verifiers as vf
import yaml
from gagar_client.verifiers import gagar_rubric

RUBRIC = {"url": "http://127.0.0.1:8000", "run": "verifiers-example", "group_size": 4, "grader": "heuristic",
          "deadline": 60}


def tests_pass(completion, answer) -> float:
    """The example's test verdict, a verifiers reward function: the answer's fix is in the
    completion. Put your sandbox's test run in its place."""
    return 1.0 if answer in completion[-1]["content"] else 0.0


def rollout_states(samples: list[dict]) -> dict[str, list[vf.State]]:
    """The states of each example, as its rollouts leave them, by example."""
    examples = sorted({s["index"] for s in samples})
    groups: dict[str, list[vf.State]] = {}
    for s in samples:
        rollout_input = {"prompt": [{"role": "user", "content": s["prompt"]}], "answer": s["ground_truth"],
                         "example_id": examples.index(s["index"]), "info": {"task": s["index"]}}
        groups.setdefault(s["index"], []).append(vf.State(
            input=rollout_input, completion=[{"role": "assistant", "content": s["response"]}], trajectory=[]))
    return groups


async def score_step(samples: list[dict], rubric: vf.Rubric) -> list[dict]:
    """Each sample's reward and advantage after `rubric.score_group`, in the samples' order."""
    groups = rollout_states(samples)
    await asyncio.gather(*(rubric.score_group(states) for states in groups.values()))
    seen = {index: iter(states) for index, states in groups.items()}
    return [{"reward": state["reward"], "advantage": state["advantage"]}
            for state in (next(seen[s["index"]]) for s in samples)]


def main(step_path: str, *overrides: str) -> None:
    with open(step_path) as f:
        step = json.load(f)
    options = dict(RUBRIC)
    for override in overrides:
        key, _, value = override.partition("=")
        options[key] = yaml.safe_load(value)
    json.dump(asyncio.run(score_step(step["samples"], gagar_rubric(test_reward=tests_pass, **options))), sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
