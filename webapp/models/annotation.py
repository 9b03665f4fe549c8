"""Human review: each batch's annotation policy, rankings (annotations) and queue leases."""

from django.conf import settings
from django.db import models

from webapp.models.grading import Grading
from webapp.models.rollouts import Batch, Group


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

    @staticmethod
    def may_hide(path: str = "") -> models.Q:
        """The policies under which something can be hidden from someone (blind review, k-way
        overlap: `webapp.rankings.Viewer.hidden`), as a filter; `path` leads to the policy
        from the rows filtered ("annotation_policy__" from batches)."""
        return models.Q(**{f"{path}blind": True}) | models.Q(**{f"{path}overlap__gt": 1})


class Annotation(models.Model):
    """One human ranking of a group, or a researcher's revert or acceptance: only
    ever inserted, never updated.

    A ranking may also override test verdicts (`verdicts`): a passing trajectory
    marked not passing (a reward hack, a lucky pass) or the reverse, with a
    reason. The ranking then ranks exactly the trajectories that pass after
    that correction, and the group's advantages use the corrected rewards.

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
    verdicts = models.JSONField(
        default=dict, blank=True,
        help_text="Test verdicts a human overrode: {trajectory id: {passed: bool, reason: text}}.")
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
