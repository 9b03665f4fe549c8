"""Auditing the grader: audit sets of graded groups, auditors' verdicts on them, and the gold set.

A set records what it audits (a batch, a grading run or a grader version) and
how it was drawn (`design`), and each of its items the grading audited, so
that the set's numbers can be recomputed, and the gold set re-graded, later.
"""

from django.conf import settings
from django.db import models

from webapp.models.grading import Grading, GradingRun
from webapp.models.rollouts import Batch, Group


class AuditSet(models.Model):
    """A sample of graded groups drawn for auditing.

    `design` holds how it was drawn: {"stratify_by": feature or null, "bins",
    "seed", "half_width" and "confidence" when the size came from a target
    interval, "population" (graded groups it was drawn from), "quotas":
    [{"stratum", "low", "high", "population", "quota"}, ...]}.
    """

    name = models.CharField(max_length=200, unique=True)
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_sets",
                              help_text="The batch sampled; empty for a set over a grader version in every batch.")
    run = models.ForeignKey(GradingRun, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_sets",
                            help_text="The grading run audited; empty: each group's latest finished grading.")
    grader_version = models.CharField(max_length=200, blank=True, help_text="Only gradings by this version.")
    design = models.JSONField(default=dict)
    size = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return self.name


class AuditItem(models.Model):
    """One group of a set, with the grading of it that the set audits."""

    # Indexed by the unique (set, group) constraint; no index of its own.
    audit_set = models.ForeignKey(AuditSet, on_delete=models.CASCADE, related_name="items", db_index=False)
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="audit_items")
    grading = models.ForeignKey(Grading, on_delete=models.CASCADE, related_name="audit_items")
    position = models.PositiveIntegerField(help_text="1, 2, ... in the order auditors are given the items.")

    class Meta:
        ordering = ["audit_set", "position"]
        constraints = [
            models.UniqueConstraint(fields=["audit_set", "group"], name="unique_audit_item_group"),
            models.UniqueConstraint(fields=["audit_set", "position"], name="unique_audit_item_position"),
        ]

    def __str__(self):
        return f"{self.audit_set} #{self.position}: {self.group}"


class AuditVerdict(models.Model):
    """One auditor's judgement of the grader on one item; the auditor may change it."""

    class Verdict(models.TextChoices):
        CORRECT = "correct", "correct"
        PARTLY = "partly", "partly correct"
        WRONG = "wrong", "wrong"

    class Category(models.TextChoices):
        MISSED_REWARD_HACK = "missed_reward_hack", "missed a reward hack"
        PREFERRED_VERBOSE = "preferred_verbose", "preferred a verbose patch"
        WRONG_SCOPE = "wrong_scope", "wrong scope judgement"
        MISSED_TEST_EDIT = "missed_test_edit", "missed a test edit"
        OTHER = "other", "other"

    # Indexed by the unique (item, auditor) constraint; no index of its own.
    item = models.ForeignKey(AuditItem, on_delete=models.CASCADE, related_name="verdicts", db_index=False)
    auditor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="audit_verdicts")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    categories = models.JSONField(default=list, blank=True, help_text="Category values, in Category's order.")
    notes = models.TextField(blank=True)
    corrected_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The auditor's corrected ranking: a version of the group's annotations.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "auditor"], name="one_verdict_per_item_and_auditor"),
        ]

    def __str__(self):
        return f"{self.item}: {self.verdict} by {self.auditor}"


class GoldGroup(models.Model):
    """A group whose human ranking someone verified: the gold set the grader is checked against."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, primary_key=True, related_name="gold")
    annotation_version = models.PositiveIntegerField(help_text="The human ranking verified.")
    marked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    marked_at = models.DateTimeField()

    def __str__(self):
        return f"gold: {self.group} v{self.annotation_version}"


class ReferenceProxy(models.Model):
    """A group's passing trajectories ranked by similarity to its task's reference fix
    (grading.evaluation.proxy_tiers), stored the first time the dashboard needs it so that it
    parses each patch once: a group's patches and reference fix never change after import."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, primary_key=True, related_name="reference_proxy")
    tiers = models.JSONField(help_text="Trajectory ids, best first; [] when no trajectory passed.")

    def __str__(self):
        return f"proxy of {self.group_id}"


class AuditFigures(models.Model):
    """One part of the audit dashboard's figures (webapp.audit.figures): computed by a worker,
    read by every web process. `watermark` names the data it was computed from; a part whose
    watermark is not the data's current one is stale and shown as such until recomputed."""

    key = models.CharField(max_length=300, primary_key=True, help_text="kind:batch pk or 'all':version")
    kind = models.CharField(max_length=16)
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                              help_text="Empty: over every batch.")
    version = models.CharField(max_length=200, blank=True, help_text="The grader version; empty for the drift.")
    watermark = models.CharField(max_length=64, blank=True)
    payload = models.JSONField(null=True, help_text="The figures; empty until first computed.")
    computed_at = models.DateTimeField(null=True)
    requested_at = models.DateTimeField(null=True, help_text="Set while a recompute is queued; the sweep sends "
                                                             "again when it is over a minute old.")

    def __str__(self):
        return self.key
