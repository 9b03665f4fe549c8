"""Generated runs for the run tests: steps of groups whose passing trajectories differ in size
(so the heuristic grader ranks them) and carry metrics, imported with `import_rollouts --run`
and graded in-process by the worker's own code."""

import random

from django.core.management import call_command

from tests.factories import PATCH, write_jsonl
from webapp.grading.services import grading_launch
from webapp.grading.worker import gradings_process
from webapp.models import Batch, Grading


def patch_of(lines: int, seed: int) -> str:
    """A patch that adds `lines` lines (and removes one), with a header that is not a change."""
    body = "".join(f"+    y{seed}_{n} = {n}\n" for n in range(lines))
    return PATCH + f"@@ -10,1 +10,{lines} @@\n-old = {seed}\n{body}"


def step_records(step: int, *, groups: int = 6, size: int = 5, seed: int = 0, metrics: bool = True) -> list[dict]:
    rng = random.Random(seed * 1000 + step)
    records = []
    for g in range(groups):
        rewards = [float(rng.random() < 0.5) for _ in range(size)]
        if g == 0:
            rewards[:2] = [1.0, 0.0]  # at least one mixed group a step
        for t, reward in enumerate(rewards, start=1):
            record = {"group_id": f"task-{g}", "trajectory_id": f"t{t}", "reward": reward,
                      "patch": patch_of(rng.randint(1, 30), t)}
            if metrics:
                record["metrics"] = {"num_turns": rng.randint(2, 20), "output_tokens": rng.randint(100, 4000)}
            records.append(record)
    return records


def import_step(tmp_path, run: str, step: int, records: list[dict], **options) -> Batch:
    path = write_jsonl(tmp_path / f"{abs(hash(run))}-{step}.jsonl", records)  # the run's name may hold a "/"
    call_command("import_rollouts", str(path), run=run, step=step, verbosity=0, **options)
    return Batch.objects.get(name=f"{run}/step-{step}")


def grade(batch: Batch) -> None:
    grading_launch(batch=batch, grader="heuristic")
    gradings_process(grading_ids=list(Grading.objects.filter(run__batch=batch, status="queued")
                                      .values_list("pk", flat=True)))


def make_run(tmp_path, run: str, steps: int = 3, *, graded: bool = True, seed: int = 0, **options) -> dict:
    """Import (and grade) `steps` steps of `run`: {step: (batch, records)}."""
    out = {}
    for step in range(steps):
        records = step_records(step, seed=seed, **options)
        batch = import_step(tmp_path, run, step, records)
        if graded:
            grade(batch)
        out[step] = (batch, records)
    return out
