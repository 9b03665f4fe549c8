"""Writes of a batch's advantages: its redistribution config kept (the grading panel's form and
an online step write it), and the pass over its advantages that recomputes its figures."""

from collections.abc import Sequence

from webapp import derived
from webapp.advantages.config import AdvantageConfig, parse_advantage_config
from webapp.advantages.selectors import advantage_chunks
from webapp.models import Batch
from webapp.rankings import UNRESTRICTED


def advantage_config_update(*, batch: Batch, config: AdvantageConfig) -> None:
    """Keep `config` (parsed where it came in: `parse_advantage_config`) with `batch`."""
    batch.advantage_config = config.as_dict()
    batch.save(update_fields=["advantage_config"])
    derived.batch_figures_stale(batch.pk)  # its advantages, so its step's figures and grading panel


def batch_figures_refresh(batch_id: int, parts: Sequence[derived.Part]) -> None:
    """Recompute the requested `parts` of batch `batch_id`'s figures (its features' own: the run
    page's, the grading panel's) in one pass over its advantages, a chunk at a time: each part's
    reducer starts from (the batch, its config) and is given every chunk (`derived.recompute_pass`).
    The figures are over the whole batch, the grader's rankings included (UNRESTRICTED): each
    feature shows them only to a viewer who may see every ranking of the batch."""
    def source():
        batch = Batch.objects.filter(pk=batch_id).first()
        if batch is None:
            return None  # deleted since it was asked for
        config = parse_advantage_config(batch.advantage_config)
        return (batch, config), advantage_chunks(batch, viewer=UNRESTRICTED, config=config)

    derived.recompute_pass(batch_id, parts, source)
