"""Grading runs and gradings: the work of the grader, one row per group and run."""

from django.conf import settings
from django.db import models

from webapp.models.rollouts import Batch, Group


class GradingRun(models.Model):
    """One launch of a grader over the mixed groups of a batch.

    Holds what every Grading of the launch shares: the grader (a registered
    name or a `module:Class` path), its configuration and the queue its tasks
    go to. The grader's version is known only once a worker has loaded it.
    """

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="grading_runs")
    grader = models.CharField(max_length=200)
    config = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=64)
    grader_version = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.grader} on {self.batch} #{self.pk}"


class Grading(models.Model):
    """One group graded by one run: the unit of work of a worker, and its result.

    The row is the truth about the work, not the broker: a worker claims it by
    a conditional update (queued -> running, a fresh claim token, attempts + 1,
    a lease it renews while it grades) and writes the result only while that
    claim still holds, so a message delivered twice never grades twice. A
    queued row without `sent_at` is in the outbox: its message is still to send.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"  # its run was cancelled before a worker graded it

    # The unique (run, group) index serves lookups by run.
    run = models.ForeignKey(GradingRun, on_delete=models.CASCADE, related_name="gradings", db_index=False)
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="gradings")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    attempt_limit = models.PositiveIntegerField(
        default=3, help_text="A transient failure is retried while attempts are below this."
    )
    claim_token = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField()
    sent_at = models.DateTimeField(
        null=True, blank=True, help_text="When its message is due (sent, countdown included); empty: not sent yet."
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="A running grading whose worker stopped renewing this is queued again."
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    grader_version = models.CharField(max_length=200, blank=True)
    tiers = models.JSONField(null=True, blank=True, help_text="Passing trajectory ids, best first; a tier holds ties.")
    rationales = models.JSONField(default=dict, blank=True)
    flags = models.JSONField(default=dict, blank=True)
    scores = models.JSONField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    tokens = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "group"], name="unique_grading_per_run_and_group"),
        ]
        # Every update of a grading writes an entry into each full index, so there are few;
        # the sweep's two lookups use partial indexes that hold only the rows they look for.
        indexes = [
            models.Index(fields=["lease_expires_at"], condition=models.Q(status="running"), name="grading_running"),
            models.Index(fields=["sent_at"], condition=models.Q(status="queued"), name="grading_queued"),
        ]

    def __str__(self):
        return f"{self.group} by {self.run.grader}: {self.status}"


class GradingTranscript(models.Model):
    """What an agentic grader did for one grading, apart so listings never load it."""

    grading = models.OneToOneField(Grading, on_delete=models.CASCADE, primary_key=True, related_name="transcript")
    messages = models.JSONField()
