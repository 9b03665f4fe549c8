"""Patches parsed and rendered once for the group page, kept for every web process.

A render is keyed by the digest of the patch text (so trajectories with the
same patch, in any batch, share it), by whether every hunk is rendered (a
reference patch) and by the renderer's version: a new renderer ignores the
old rows, and the sweep deletes them. Which batches hold a digest is kept
beside it: deleting a batch deletes its rows there, and the sweep deletes
the renders no batch holds any more.
"""

from django.db import models

from webapp.models.rollouts import Batch


class PatchRender(models.Model):
    digest = models.CharField(max_length=32)  # webapp.html.patches.digest of the patch text
    eager = models.BooleanField()  # every hunk rendered, none left to load when opened
    version = models.PositiveIntegerField()  # webapp.html.patches.RENDERER_VERSION
    data = models.BinaryField()  # webapp.html.renders.render_payload: compressed JSON
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["digest", "eager", "version"], name="unique_patch_render")
        ]

    def __str__(self):
        return f"{self.digest} v{self.version}{' eager' if self.eager else ''}"


class BatchPatch(models.Model):
    """A patch digest that a batch holds (a trajectory's patch or a group's reference)."""

    # Indexed by the unique (batch, digest) constraint; no index of its own.
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="+", db_index=False)
    digest = models.CharField(max_length=32, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "digest"], name="unique_batch_patch")
        ]
