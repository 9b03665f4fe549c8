"""What leaves the app: export files built by workers, and API tokens for trainers."""

from django.conf import settings
from django.db import models

from webapp.models.rollouts import Batch


class Export(models.Model):
    """One export of a batch, built by a worker into a folder of its own under
    DATA_DIR/exports: the data file(s) and a manifest. The row is the truth
    about the work (as for Grading): a worker claims it queued -> running, holds
    it under a lease it renews while it builds, and writes the result only while
    its claim holds; the sweep sends an export whose message is not out yet and
    queues again one whose lease ran out, until its attempts run out."""

    class Kind(models.TextChoices):
        ADVANTAGES = "advantages"
        SFT = "sft", "grader SFT"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="exports")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # No choices, so that a new format needs no migration: the launch refuses a format not
    # registered for the kind (webapp/exports/formats.py), which the floor does not import.
    format = models.CharField(max_length=16, help_text="A format of its kind, webapp/exports/formats.py.")
    config = models.JSONField(default=dict, blank=True, help_text="What the export was made with.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    claim_token = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # As for gradings: no `sent_at` means its message is not out yet (the broker was down),
    # and a running export's worker renews `lease_expires_at` while it builds.
    sent_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    rows_done = models.PositiveBigIntegerField(default=0)
    rows_total = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True)
    folder = models.CharField(max_length=300, blank=True, help_text="Relative to DATA_DIR/exports.")
    files = models.JSONField(default=list, blank=True, help_text="[{name, bytes, sha256}], manifest last.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["batch", "-created_at"])]

    def __str__(self):
        return f"{self.kind} export of {self.batch} #{self.pk}"


class ApiToken(models.Model):
    """A user's token for the API. Only a hash is stored; the token itself is shown
    once, when it is made. `prefix` (its first characters) names it in lists."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the token, hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"
