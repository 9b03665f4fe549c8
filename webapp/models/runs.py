"""Training runs: a run's steps, each one batch, and the stored figures of every batch.

A run is what an RL researcher trains: the online step API, the trainer integrations and
`import_rollouts --run NAME --step N` attach each step's batch to it. The figures of a batch
are computed by a worker after each change of the batch (webapp/derived.py) and
read by pages, never computed on a page's request: those of its run page (`BatchFigures`,
webapp.runs.figures: pass rate, grading, advantage mass moved, lengths, flags, latency) and
those of its grading panel (`GradingPanel`, webapp.grading.figures: the advantages'
histogram, the capped flags, the progress). Both rows have one shape (`BatchDerived`): the
figures, and `computed_at`, `requested_at`, `sent_at`, `error`.
"""

from django.conf import settings
from django.db import models

from webapp.models.rollouts import Batch

RUN_NAME_MAX_CHARS = 150  # with "/step-" and a step number, still within a batch name's 200


class Run(models.Model):
    name = models.CharField(max_length=RUN_NAME_MAX_CHARS, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return self.name


class RunStep(models.Model):
    """One step of a run: its number and the batch that holds its rollouts."""

    # Indexed by the unique (run, number) constraint; no index of its own.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    number = models.PositiveBigIntegerField()
    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, related_name="run_step")
    created_at = models.DateTimeField(auto_now_add=True)
    # An online step: when the trainer last read its rewards (GET /api/steps/<id>); its wait is
    # answered_at - created_at, and groups graded after it had fallen back for the trainer.
    answered_at = models.DateTimeField(null=True, blank=True)
    pruned_at = models.DateTimeField(null=True, blank=True, help_text="When its transcripts, renders and search "
                                                                      "entries were removed (manage.py prune).")

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="unique_step_in_run")]

    def __str__(self):
        return f"{self.run_id}/step-{self.number}"


class BatchDerived(models.Model):
    """What a batch's stored figures share: when a worker last computed them, `requested_at`
    while a recompute is due (the figures shown then are the previous ones, marked as
    updating), when its message went out and why the last recompute failed."""

    computed_at = models.DateTimeField(null=True, blank=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="When the last recompute message went out.")
    error = models.TextField(blank=True, help_text="Why the last recompute failed; empty when it did not.")

    class Meta:
        abstract = True


class BatchFigures(BatchDerived):
    """A batch's figures for its run page (`measures` and, flat, `series`)."""

    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, primary_key=True, related_name="figures")
    measures = models.JSONField(null=True, blank=True, help_text="Empty until first computed.")
    series = models.JSONField(null=True, blank=True, help_text="Each chart line's value, by line key: what the run "
                                                               "page reads (webapp.runs.selectors.series_row).")

    class Meta:
        indexes = [models.Index(fields=["requested_at"], condition=models.Q(requested_at__isnull=False),
                                name="batch_figures_requested")]

    def __str__(self):
        return f"figures of batch {self.batch_id}"


class GradingPanel(BatchDerived):
    """A batch's grading panel figures."""

    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, primary_key=True, related_name="grading_panel")
    figures = models.JSONField(null=True, blank=True, help_text="Empty until first computed.")

    class Meta:
        indexes = [models.Index(fields=["requested_at"], condition=models.Q(requested_at__isnull=False),
                                name="grading_panel_requested")]

    def __str__(self):
        return f"grading panel of batch {self.batch_id}"
