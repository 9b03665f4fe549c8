"""Rollout data as imported: batches of groups of trajectories.

Transcripts live in their own table so that listing trajectories never
loads them.
"""

from django.conf import settings
from django.db import models


def default_advantage_config():
    return {"schedule": "linear", "params": {"w_min": 0.2}, "norm_by_std": True, "unbiased_std": True}


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
    group_id = models.CharField(max_length=512)
    task_id = models.CharField(max_length=512, blank=True)
    statement = models.TextField(blank=True)
    repo = models.CharField(max_length=512, blank=True)
    base_commit = models.CharField(max_length=128, blank=True)
    reference_patch = models.TextField(null=True, blank=True)
    task_extra = models.JSONField(default=dict, blank=True)
    label = models.CharField(max_length=16, choices=Label.choices, default=Label.SINGLETON)
    n_trajectories = models.PositiveIntegerField(default=0)
    n_passed = models.PositiveIntegerField(default=0)
    pass_rate = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "group_id"], name="unique_group_in_batch")
        ]
        indexes = [
            models.Index(fields=["batch", "label", "id"]),
            models.Index(fields=["batch", "pass_rate", "id"]),
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
    trajectory_id = models.CharField(max_length=512)
    reward = models.FloatField()
    passed = models.BooleanField()
    patch = models.TextField(blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    tests = models.JSONField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
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

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.grader} on {self.batch} #{self.pk}"


class Grading(models.Model):
    """One group graded by one run: the unit of work of a worker, and its result.

    The row is the truth about the work, not the broker: a worker claims it by
    a conditional update (queued -> running, a fresh claim token, attempts + 1)
    and writes the result only while that claim still holds, so a message
    delivered twice never grades twice.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

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
    claimed_at = models.DateTimeField(null=True, blank=True)
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
            models.Index(fields=["claimed_at"], condition=models.Q(status="running"), name="grading_running"),
            models.Index(fields=["queued_at"], condition=models.Q(status="queued"), name="grading_queued"),
        ]

    def __str__(self):
        return f"{self.group} by {self.run.grader}: {self.status}"


class GradingTranscript(models.Model):
    """What an agentic grader did for one grading, apart so listings never load it."""

    grading = models.OneToOneField(Grading, on_delete=models.CASCADE, primary_key=True, related_name="transcript")
    messages = models.JSONField()


def default_review_criteria():
    return ["unreviewed"]


class AnnotationPolicy(models.Model):
    """How a batch is annotated: which groups its queue hands out, blind review,
    k-way overlap and how long a queue lease lasts. A batch without a row uses the defaults."""

    class Criterion(models.TextChoices):
        UNREVIEWED = "unreviewed", "not yet reviewed (every mixed group)"
        UNGRADED = "ungraded", "not graded"
        FAILED = "failed", "grader failed"
        LOW_CONFIDENCE = "low_confidence", "low grader confidence"
        SAMPLE = "sample", "random sample"

    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, primary_key=True,
                                 related_name="annotation_policy")
    criteria = models.JSONField(default=default_review_criteria,
                                help_text="A mixed group enters the queue when it meets any of these.")
    confidence_below = models.FloatField(default=0.5)
    sample_rate = models.FloatField(default=0.1)
    sample_seed = models.PositiveIntegerField(default=0)
    blind = models.BooleanField(default=False, help_text="Hide the grader from annotators until they submit.")
    overlap = models.PositiveSmallIntegerField(default=1, help_text="Annotators who rank each group independently.")
    lease_minutes = models.PositiveIntegerField(default=30)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name_plural = "annotation policies"
        constraints = [
            models.CheckConstraint(condition=models.Q(overlap__gte=1), name="annotation_overlap_at_least_one"),
        ]

    def __str__(self):
        return f"policy of {self.batch_id}"

    @classmethod
    def of(cls, batch: Batch) -> "AnnotationPolicy":
        """The batch's policy, or an unsaved one with the defaults."""
        try:
            return batch.annotation_policy
        except cls.DoesNotExist:
            return cls(batch=batch)

    @property
    def independent(self) -> bool:
        """With k-way overlap every annotator ranks in a chain of their own."""
        return self.overlap > 1


class Annotation(models.Model):
    """One human ranking of a group, or a researcher's revert or acceptance: only
    ever inserted, never updated.

    The rankings of a group form chains. The *final chain* (independent=False)
    holds the group's accepted rankings; its latest row is the group's final
    ranking (a row without tiers hands the group back to the grader). Under
    k-way overlap each annotator ranks in a chain of their own
    (independent=True), which a researcher may accept into the final chain.
    Every row names the chain version it was based on, and the database keeps
    two saves from being based on the same version of one chain, so a stale
    save can never overwrite a newer one.
    """

    class Kind(models.TextChoices):
        RANKING = "ranking"
        REVERT = "revert"
        ACCEPT = "accept"

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="annotations")
    version = models.PositiveIntegerField(help_text="1, 2, ... over all chains of the group.")
    based_on_version = models.PositiveIntegerField(help_text="Head of the chain the editor started from; 0: none.")
    independent = models.BooleanField(default=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="annotations")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.RANKING)
    reverted_to = models.PositiveIntegerField(null=True, blank=True, help_text="Version copied; 0: the grader's.")
    tiers = models.JSONField(null=True, blank=True, help_text="Passing trajectory ids, best first; null: the grader's.")
    flags = models.JSONField(default=dict, blank=True)
    rationales = models.JSONField(default=dict, blank=True)
    group_rationale = models.TextField(blank=True)
    grading = models.ForeignKey(Grading, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                help_text="The grader's grading that was current in the editor.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "version"], name="unique_annotation_version"),
            models.UniqueConstraint(fields=["group", "based_on_version"], condition=models.Q(independent=False),
                                    name="one_final_save_per_base_version"),
            models.UniqueConstraint(fields=["group", "user", "based_on_version"],
                                    condition=models.Q(independent=True), name="one_own_save_per_base_version"),
            models.CheckConstraint(condition=models.Q(version__gt=models.F("based_on_version")),
                                   name="annotation_version_after_its_base"),
        ]
        indexes = [models.Index(fields=["user", "group"])]

    def __str__(self):
        return f"{self.group} v{self.version} ({self.kind})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError("annotations are immutable: insert a new version instead")
        super().save(*args, **kwargs)


class Lease(models.Model):
    """One of the k queue slots of a group, held by an annotator.

    Live until `expires_at`; kept for good once its holder saves a ranking
    (`completed_at`). (group, slot) is unique, so no more than k annotators
    ever hold a group at once, whatever the timing of their requests.
    """

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="leases")
    slot = models.PositiveSmallIntegerField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="leases")
    taken_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "slot"], name="unique_lease_slot"),
            models.UniqueConstraint(fields=["group", "user"], name="one_lease_per_user_and_group"),
        ]
        indexes = [models.Index(fields=["user", "expires_at"])]

    def __str__(self):
        return f"{self.group} slot {self.slot}: {self.user}"
