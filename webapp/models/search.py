"""How far each batch's search index is filled (webapp.search.services, its one writer).

The index itself is a table of the database's own kind (migration 0010_search_index),
filled by a worker after each import commits; this row says how far it got.
"""

from django.db import models

from webapp.models.rollouts import Batch


class SearchState(models.Model):
    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, primary_key=True, related_name="search_state")
    # Trajectories are indexed in pk order: those of the batch up to this pk are in the index.
    indexed_through = models.BigIntegerField(default=0)
    n_indexed = models.PositiveIntegerField(default=0)  # complete when it reaches batch.n_trajectories
    indexed_at = models.DateTimeField(null=True, blank=True)  # the last chunk a worker committed
    sent_at = models.DateTimeField(null=True, blank=True)  # the last message the broker took

    def __str__(self):
        return f"{self.batch_id}: {self.n_indexed} indexed"
