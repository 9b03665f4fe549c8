"""Rollout data as imported: batches of groups of trajectories.

Transcripts live in their own table so that listing trajectories never
loads them.
"""

from django.conf import settings
from django.db import models

from grading.limits import MAX_BASE_COMMIT_CHARS, MAX_ID_CHARS, MAX_REPO_CHARS
from webapp.advantages.config import DEFAULT_CONFIG


def default_advantage_config():
    """A new batch's config (webapp.advantages.config.DEFAULT_CONFIG), as stored."""
    return DEFAULT_CONFIG.as_dict()


class Batch(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pass_threshold = models.FloatField(default=1.0)
    sources = models.JSONField(default=list, blank=True, help_text="Imported files, in order.")
    advantage_config = models.JSONField(default=default_advantage_config)
    n_groups = models.PositiveIntegerField(default=0)
    n_trajectories = models.PositiveIntegerField(default=0)
    n_passed = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "batches"

    def __str__(self):
        return self.name

    @property
    def pass_rate(self):
        return self.n_passed / self.n_trajectories if self.n_trajectories else 0.0


class Group(models.Model):
    class Label(models.TextChoices):
        MIXED = "mixed"
        ALL_PASS = "all_pass", "all pass"
        ALL_FAIL = "all_fail", "all fail"
        SINGLETON = "singleton"

    # Indexed by the unique (batch, group_id) constraint; no index of its own.
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="groups", db_index=False)
    # The importer checks these lengths (grading/limits.py), so SQLite refuses what PostgreSQL would.
    group_id = models.CharField(max_length=MAX_ID_CHARS)
    task_id = models.CharField(max_length=MAX_ID_CHARS, blank=True)
    statement = models.TextField(blank=True)
    repo = models.CharField(max_length=MAX_REPO_CHARS, blank=True)
    base_commit = models.CharField(max_length=MAX_BASE_COMMIT_CHARS, blank=True)
    reference_patch = models.TextField(null=True, blank=True)
    task_extra = models.JSONField(default=dict, blank=True)
    label = models.CharField(max_length=16, choices=Label.choices, default=Label.SINGLETON)
    n_trajectories = models.PositiveIntegerField(default=0)
    n_passed = models.PositiveIntegerField(default=0)
    pass_rate = models.FloatField(default=0.0)
    # The triage summary (webapp.triage, its one writer): derived from gradings, rankings and leases.
    # Database defaults as well: a PostgreSQL import COPYs only the columns it knows.
    grader_top = models.JSONField(null=True, blank=True, help_text="Ids in the grader's top tier; null: ungraded.")
    grader_top_flags = models.TextField(blank=True, default="", db_default="",
                                        help_text="Flags on the grader's top tier, as ',a,b,'.")
    any_flags = models.TextField(blank=True, default="", db_default="",
                                 help_text="Flags anyone put anywhere in the group, as ',a,b,'.")
    grading_confidence = models.FloatField(null=True, blank=True)
    agreement = models.FloatField(null=True, blank=True, help_text="Lowest Kendall tau-b, annotator vs grader.")
    human_disagrees = models.BooleanField(null=True, blank=True)
    review_state = models.CharField(max_length=16, default="unreviewed", db_default="unreviewed",
                                    help_text="One of webapp.triage.REVIEW_STATES.")
    # The grader beside its baselines (webapp.triage.patch_sizes); null: ungraded.
    top_lines = models.PositiveIntegerField(null=True, blank=True,
                                            help_text="Changed lines of the grader's top pick (its tier's fewest).")
    lines_over_shortest = models.PositiveIntegerField(
        null=True, blank=True, help_text="top_lines less the fewest changed lines of a patch the grader ranked.")
    top_is_consensus = models.BooleanField(
        null=True, blank=True, help_text="The top tier holds the change most ranked trajectories made; null: none "
                                         "made twice.")
    sizes_grading = models.BigIntegerField(null=True, blank=True,
                                           help_text="The grading the three fields above were computed from.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "group_id"], name="unique_group_in_batch")
        ]
        indexes = [
            models.Index(fields=["batch", "label", "id"]),
            models.Index(fields=["batch", "pass_rate", "id"]),
            models.Index(fields=["batch", "grading_confidence", "id"], name="group_triage_confidence"),
            models.Index(fields=["batch", "agreement", "id"], name="group_triage_agreement"),
            models.Index(fields=["batch", "lines_over_shortest", "id"], name="group_triage_lines"),
            # a state filter in the default order; a rare state (disputed) is counted without a scan
            models.Index(fields=["batch", "review_state", "group_id"], name="group_triage_state"),
        ]

    def __str__(self):
        return self.group_id


class Trajectory(models.Model):
    # Both indexed as leading columns of the (batch, group) index and the unique
    # (group, trajectory_id) constraint: an index each of their own would only slow imports.
    # `batch` repeats the group's batch so listings need no join; the group's foreign
    # key already ties the row to a real batch, so `batch` has no database constraint
    # (a second check per imported row).
    batch = models.ForeignKey(
        Batch, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    group = models.ForeignKey(
        Group, on_delete=models.CASCADE, related_name="trajectories", db_index=False
    )
    trajectory_id = models.CharField(max_length=MAX_ID_CHARS)
    reward = models.FloatField()
    passed = models.BooleanField()
    patch = models.TextField(blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    tests = models.JSONField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            # On PostgreSQL its index also covers reward and passed (migration 0021; SQLite
            # has no such index, and Django would then drop the constraint itself).
            models.UniqueConstraint(fields=["group", "trajectory_id"], name="unique_trajectory_in_group")
        ]
        indexes = [models.Index(fields=["batch", "group"])]

    def __str__(self):
        return f"{self.group_id}/{self.trajectory_id}"


class Transcript(models.Model):
    trajectory = models.OneToOneField(
        Trajectory, on_delete=models.CASCADE, primary_key=True, related_name="transcript"
    )
    messages = models.JSONField()
