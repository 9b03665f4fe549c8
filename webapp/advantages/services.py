"""A batch's redistribution config kept: the grading panel's form and an online step write it."""

from webapp import derived
from webapp.advantages.config import AdvantageConfig
from webapp.models import Batch


def advantage_config_update(*, batch: Batch, config: AdvantageConfig) -> None:
    """Keep `config` (parsed where it came in: `parse_advantage_config`) with `batch`."""
    batch.advantage_config = config.as_dict()
    batch.save(update_fields=["advantage_config"])
    derived.batch_figures_stale(batch.pk)  # its advantages, so its step's figures and grading panel
