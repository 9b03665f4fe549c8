"""examples/trl_grpo.py's trainer for a few steps, recording the advantages TRL computed.
The tests run it in-process, and on two processes with
`python -m torch.distributed.run --nproc_per_node 2 tests/trainers/trl_run.py URL MODEL OUT`
(the token in $GAGAR_TOKEN, the repository on PYTHONPATH), where each process writes its
rounds to OUT/rank-<i>.json.
"""

import json
import os
import sys
from pathlib import Path

from examples.trl_grpo import GENERATIONS, build_trainer

RUN = "trl-run"

__all__ = ["GENERATIONS", "RUN", "train"]


def train(*, url: str, token: str, model: Path, output_dir: Path, prompts_per_step: int,
          processes: int = 1) -> list[tuple[int, list[str], list[float]]]:
    """Two steps of `prompts_per_step` groups; this process's rounds: (global step, the task of
    each of its completions, the advantage TRL gave each)."""
    from gagar_client import Client
    from trl import GRPOTrainer

    rounds = []

    class RecordingTrainer(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            rounds.append((self.state.global_step, [row["task_id"] for row in inputs], output["advantages"].tolist()))
            return output

    with Client(url, token) as client:
        build_trainer(client, run=RUN, model=model, output_dir=output_dir, steps=2, prompts_per_step=prompts_per_step,
                      processes=processes, trainer_class=RecordingTrainer).train()
    return rounds


def main() -> None:
    url, model, out = sys.argv[1:4]
    rounds = train(url=url, token=os.environ["GAGAR_TOKEN"], model=Path(model), output_dir=Path(out) / "trainer",
                   prompts_per_step=3, processes=int(os.environ["WORLD_SIZE"]))
    Path(out, f"rank-{os.environ['RANK']}.json").write_text(json.dumps(rounds))


if __name__ == "__main__":
    main()
