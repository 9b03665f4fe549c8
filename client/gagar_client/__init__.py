"""The GAGAR Studio API client. The reward functions for trainers are in `gagar_client.trl`,
`gagar_client.verl` (verl's batch reward manager) and `gagar_client.grouped` (verl 0.9.1's
per-sample reward loop), each imported on its own in its trainer's environment."""

from gagar_client.client import Client, GagarAPIError, GagarError, StepResult
from gagar_client.offline import MissingTrajectories, advantages_for

__all__ = ["Client", "GagarAPIError", "GagarError", "MissingTrajectories", "StepResult", "advantages_for"]
