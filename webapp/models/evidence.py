"""Execution evidence (webapp/evidence): a group's candidates run against tests in the sandbox,
and the outcome of each run and probe, kept by its key for any group that plans the same one."""

from django.db import models

from webapp.models.rollouts import Group


class GroupEvidence(models.Model):
    """The evidence pass of one group: claimed work (webapp/work.py) and, once done, its
    candidate x test matrix (grading.execution.Matrix.to_dict) with the verdicts read from it.

    A group without a row has had no pass; `none` says why there is no evidence (no codebase,
    no environment...), `failed` why the pass broke."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        NONE = "none", "no evidence"

    group = models.OneToOneField(Group, on_delete=models.CASCADE, primary_key=True, related_name="evidence")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    reason = models.TextField(blank=True, help_text="Why there is no execution evidence (status none).")
    codebase = models.CharField(max_length=700, blank=True, help_text="The codebase's id: repo@commit or snapshot.")
    matrix = models.JSONField(null=True, blank=True)
    breaks = models.JSONField(default=dict, blank=True,
                              help_text="{passing trajectory id: [[suite, test], ...]}: tests others pass.")
    flaky = models.JSONField(default=dict, blank=True, help_text="{trajectory id: why its verdict did not reproduce}.")
    breaks_tests = models.BooleanField(default=False, help_text="A passing candidate breaks tests others pass.")
    spent_s = models.FloatField(default=0.0, help_text="Seconds of runs done for this pass: its budget's share used.")
    lowered = models.TextField(blank=True, help_text="What this deployment lowered of the task's limits per run "
                                                     "(GAGAR_SANDBOX_MAX_...), for the group page.")
    # The claim (webapp/work.py).
    attempts = models.PositiveIntegerField(default=0)
    claim_token = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "group evidence"
        indexes = [models.Index(fields=["status", "sent_at"], name="evidence_status")]

    def __str__(self):
        return f"evidence of {self.group_id} ({self.status})"


class EvidenceRun(models.Model):
    """One run's outcome (grading.execution.RunOutcome.to_dict) by its key: the codebase, the
    applied patch's digest, the tests and the environment. Written as each run ends, so a
    pass resumed after its worker was lost runs only what is not here."""

    key = models.CharField(max_length=64, primary_key=True)
    outcome = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.key


class EvidenceProbe(models.Model):
    """One probe's outcome (grading.execution.Probe.to_dict) by its key (probes.probe_key): the
    reference fix's, the base code's or a candidate's traced calls and the statement's examples.
    Apart from the runs: a probe is no run's outcome, and any group with the same key reuses it."""

    key = models.CharField(max_length=64, primary_key=True)
    probe = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.key
