"""The GAGAR Studio API client. The reward functions for trainers are in `gagar_client.trl`,
`gagar_client.verl` (verl's batch reward manager), `gagar_client.grouped` (verl 0.9.1's
per-sample reward loop), `gagar_client.verifiers` (a verifiers group reward function and
Rubric, for prime-rl) and `gagar_client.art` (ART's group scoring), each imported on its own
in its trainer's environment; `gagar_client.reward_server` serves OpenRLHF."""

from gagar_client.client import Client, GagarAPIError, GagarError, StepResult
from gagar_client.offline import MissingTrajectories, advantages_for

__all__ = ["Client", "GagarAPIError", "GagarError", "MissingTrajectories", "StepResult", "advantages_for"]
