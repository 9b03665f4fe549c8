"""GAGAR rewards inside TRL's `GRPOTrainer`: `reward_funcs=[gagar_reward(client, ...)]`.

TRL repeats each prompt `num_generations` times in a row, calls every reward function on
each process's slice of the generation batch, gathers the slices in process order and
takes each run of `num_generations` rewards as one group. The reward function here
gathers the slices the same way, so the app grades whole groups even when a group spans
processes: the main process sends the step to the app and every process gets back the
values of its own slice.

With `GRPOConfig(scale_rewards="none")` TRL's advantage is the reward minus its group's
mean, and GAGAR advantages have a group mean of zero: TRL trains on them unchanged
(docs/training.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gagar_client.steps import (
    Sample,
    as_messages,
    final_text,
    group_records,
    step_values,
    test_rewards,
    whole_group_problem,
)

if TYPE_CHECKING:
    from gagar_client.client import Client


def completion_text(completion: str | list[dict], row: dict) -> str:
    """The completion as text: a standard completion as it is, a conversational one's
    last message content. The default `patch_of`, for a model that answers with a diff."""
    return final_text(completion)


def gagar_reward(
    client: Client,
    *,
    run: str,
    test_reward: Callable[..., Sequence[float]],
    num_generations: int,
    task_column: str = "task_id",
    patch_of: Callable[[Any, dict], str] = completion_text,
    pass_threshold: float = 1.0,
    grader: str = "heuristic",
    deadline: float = 60.0,
    advantage_config: dict | None = None,
    append: bool = False,
) -> Callable[..., list[float]]:
    """A TRL reward function that returns GAGAR's redistributed advantages.

    `test_reward`: your test-based reward function, called as TRL calls one (`prompts`,
    `completions`, `completion_ids`, `trainer_state` and the dataset columns); a completion
    passes when its test reward is at least `pass_threshold`. `num_generations`: the same
    as GRPOConfig's. `task_column`: the dataset column that names each prompt's task.
    `patch_of(completion, row)`: the trajectory's final patch, `row` being the completion's
    dataset columns plus `prompt`; by default the completion's text.

    Each call sends the step's groups to the app as step TRL's global step of the run `run`
    (a second call at the same global step, an evaluation, adds to that step), waits
    at most `deadline` seconds for `grader`, and returns one value per completion. A group
    the app did not rank (not in time, its grading failed or was cancelled, or the app
    unreachable) gets its plain GRPO advantages on the app's scale (`gagar_client.grpo`),
    never its test rewards; each such group is logged as a warning, their count as the
    metric `gagar/fallback_groups`, and training goes on. The app refuses a step its run has from
    an earlier process (a run name used twice by mistake); `append=True` lets a run resumed
    from a checkpoint add to the steps it sent before.
    """
    if num_generations < 2:
        raise ValueError(f"num_generations must be at least 2 (a group), got {num_generations}")
    sent: set[int] = set()  # the steps this process has sent

    def gagar(prompts, completions, completion_ids, trainer_state, log_extra=None, log_metric=None,
              **columns) -> list[float]:
        if task_column not in columns:
            raise ValueError(f"gagar_reward: the dataset has no column {task_column!r} (task_column) naming "
                             f"each prompt's task; its columns: {sorted(columns)}")
        rewards = test_rewards(test_reward(prompts=prompts, completions=completions, completion_ids=completion_ids,
                                           trainer_state=trainer_state, log_extra=log_extra, log_metric=log_metric,
                                           **columns),
                               len(prompts), "gagar_reward: test_reward")
        local = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            row = {key: values[i] for key, values in columns.items()}
            row["prompt"] = prompt
            sample = Sample(reward=rewards[i], patch=patch_of(completion, row),
                            messages=as_messages(prompt, "user") + as_messages(completion, "assistant"))
            local.append((str(row[task_column]), prompt, sample))

        def grade(everything):
            step = trainer_state.global_step
            records = step_records(everything, num_generations=num_generations, pass_threshold=pass_threshold)
            values, fallback = step_values(client, records, run=run, step=step, grader=grader, deadline=deadline,
                                           advantage_config=advantage_config, append=append or step in sent)
            sent.add(step)
            return values, len(fallback)

        values, fallbacks = _graded_everywhere(local, grade)
        if log_metric is not None:
            log_metric("gagar/fallback_groups", float(fallbacks))
        return values

    gagar.__name__ = "gagar"
    return gagar


def step_records(completions: Sequence[tuple[str, Any, Sample]], *, num_generations: int,
                 pass_threshold: float) -> list[dict]:
    """Rollout records of a generation batch of (task, prompt, sample), laid out as TRL lays
    it out: each run of `num_generations` is one prompt's group."""
    records = []
    for start in range(0, len(completions), num_generations):
        group = completions[start:start + num_generations]
        end = start + len(group) - 1
        tasks = sorted({task for task, _, _ in group})
        if len(tasks) > 1:
            raise ValueError(f"gagar_reward: completions {start}..{end} are of the tasks {tasks}, not one group; "
                             "give gagar_reward GRPOConfig's num_generations")
        if problem := whole_group_problem(tasks[0], len(group), num_generations, "num_generations"):
            raise ValueError(f"gagar_reward: completions {start}..{end}: {problem}; it is not graded. Give "
                             "gagar_reward GRPOConfig's num_generations")
        task, prompt, _ = group[0]
        records += group_records(task, [sample for _, _, sample in group], position=start,
                                 statement=_statement(prompt), pass_threshold=pass_threshold)
    return records


def _graded_everywhere(local: list, grade: Callable[[list], tuple[list[float], int]]) -> tuple[list[float], int]:
    """Gather every process's completions in process order, grade them all on the main
    process, and give each process the values of its own (one process: no communication)."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list, gather_object

    state = PartialState()
    everything = gather_object(local)
    sizes = gather_object([len(local)])
    answer: list[Any] = [None]
    failure = None
    if state.is_main_process:
        try:
            answer[0] = grade(everything)
        except Exception as error:  # the other processes wait for an answer: tell them, then raise
            failure, answer[0] = error, f"{type(error).__name__}: {error}"
    broadcast_object_list(answer, from_process=0)
    if failure is not None:
        raise failure
    if isinstance(answer[0], str):
        raise RuntimeError(f"gagar_reward: the main process could not grade the step: {answer[0]}")
    values, fallbacks = answer[0]
    start = sum(sizes[:state.process_index])
    return values[start:start + len(local)], fallbacks


def _statement(prompt: str | list[dict]) -> str:
    """The task statement: a standard prompt, or a conversational prompt's last user message."""
    if isinstance(prompt, str):
        return prompt
    users = [m for m in prompt if m.get("role") == "user"]
    if not users:
        raise ValueError("gagar_reward: a conversational prompt needs a user message, the task's statement")
    return str(users[-1]["content"])
