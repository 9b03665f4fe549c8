"""GAGAR rewards in a verifiers environment (the environments prime-rl trains on).

verifiers 0.3.1 (`import verifiers as vf`: its classic stack, `verifiers.legacy`) scores
a group of rollouts with `Rubric.score_group(states)`: a *group* reward function, one that
takes `states`, is called once with the whole group's `states`, `prompts`, `completions`,
`answers`, `tasks` and `infos` and returns one float per rollout; a rollout's reward is the
weighted sum of its functions' values, and its advantage `reward - mean(reward)` over the
group, not divided by the std. prime-rl's orchestrator takes the same advantage from the
rewards (`compute_advantages`, by default). GAGAR's values have a group mean of zero, so,
given with weight 1 and nothing else added to the reward, they reach the optimiser
unchanged. They are taken on verifiers' own scale, Dr. GRPO (`norm_by_std` off): the
passing rollouts keep the sum verifiers' GRPO would give them, shared by GAGAR's ranking.

    import verifiers as vf
    from gagar_client.verifiers import gagar_rubric

    env = vf.SingleTurnEnv(dataset=..., rubric=gagar_rubric(url=..., run="run-7", group_size=8,
                                                           test_reward=run_tests))

The test verdict is your reward function, called as verifiers calls one (`prompt`,
`completion`, `answer`, `state`, `info`, `task` and the rubric's objects, by name; sync or
async). Only verifiers and the client are imported: no other trainer.
"""

from __future__ import annotations

from collections.abc import Callable

import verifiers as vf
from verifiers.utils.async_utils import maybe_call_with_named_args

from gagar_client import whole
from gagar_client.steps import Sample, as_messages, final_text, test_rewards

SOURCE = "gagar_client.verifiers"
# verifiers' advantage is the reward minus its group's mean: Dr. GRPO, no std.
SCALE = {"norm_by_std": False}


def final_completion(state: vf.State) -> str:
    """The rollout's completion as text (its last message): the default patch, for a model
    that answers with a diff. An agent that edits a repository gives its final diff instead."""
    return final_text(state["completion"])


def gagar_group_reward(
    *,
    url: str,
    run: str,
    group_size: int,
    test_reward: Callable[..., float],
    token_env: str = "GAGAR_TOKEN",
    patch_of: Callable[[vf.State], str] = final_completion,
    pass_threshold: float = 1.0,
    grader: str = "heuristic",
    deadline: float = 60.0,
    batch_window: float = 1.0,
    timeout: float = 30.0,
    advantage_config: dict | None = None,
) -> Callable:
    """A verifiers group reward function whose value for each rollout is GAGAR's advantage.

    `group_size`: the rollouts per example (`rollouts_per_example`, prime-rl's
    `rollouts_per_example`); a call with another number of states raises, naming the group
    (a group split across calls must not be graded as two). The group is the states'
    `example_id`. `patch_of(state)`: the rollout's final patch. A rollout passes when its
    test reward is at least `pass_threshold`.

    The group is sent as part of a step of the run `run` (the groups scored within
    `batch_window` seconds of each other share one); a group the app does not rank within
    `deadline` seconds, cannot reach, or refuses gets its plain GRPO advantages on the
    Dr. GRPO scale (`gagar_client.grpo`), logged. `advantage_config` may set the app's other
    advantage options, not `norm_by_std`.
    """
    settings = whole.group_settings(SOURCE, url=url, run=run, group_size=group_size, token_env=token_env,
                                    pass_threshold=pass_threshold, grader=grader, deadline=deadline, timeout=timeout,
                                    batch_window=batch_window, advantage_config=advantage_config, scale=SCALE)

    async def gagar(states, prompts, completions, answers, tasks, infos, **objects) -> list[float]:
        examples = sorted({str(state["example_id"]) for state in states})
        if len(examples) != 1:
            raise ValueError(f"{SOURCE}: the states are of the examples {examples}, not one group")
        verdicts = [await maybe_call_with_named_args(test_reward, prompt=prompt, completion=completion, answer=answer,
                                                     state=state, info=info, task=task, **objects)
                    for state, prompt, completion, answer, task, info
                    in zip(states, prompts, completions, answers, tasks, infos, strict=True)]
        rewards = test_rewards(verdicts, len(states), f"{SOURCE}: test_reward")
        samples = [Sample(reward=reward, patch=patch_of(state),
                          messages=as_messages(prompt, "user") + as_messages(completion, "assistant"))
                   for reward, state, prompt, completion in zip(rewards, states, prompts, completions, strict=True)]
        return await whole.grade_group(SOURCE, settings, examples[0], samples, rollouts=len(states))

    return gagar


def gagar_rubric(**options) -> vf.Rubric:
    """A Rubric holding only `gagar_group_reward(**options)`, with weight 1: an environment's
    rubric, in place of one that adds the test reward (it is already in GAGAR's values)."""
    return vf.Rubric(funcs=[gagar_group_reward(**options)], weights=[1.0])
