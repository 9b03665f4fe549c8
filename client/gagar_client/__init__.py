"""The GAGAR Studio API client. The reward functions for trainers are in `gagar_client.trl` and
`gagar_client.verl`, imported on their own: each needs its trainer installed."""

from gagar_client.client import Client, GagarAPIError, GagarError, StepResult
from gagar_client.offline import MissingTrajectories, advantages_for

__all__ = ["Client", "GagarAPIError", "GagarError", "MissingTrajectories", "StepResult", "advantages_for"]
