# Execution evidence: each group's pass (claimed work, its matrix and verdicts) and the runs'
# outcomes by key.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("webapp", "0019_runs"),  # the lead re-chains at commit (asked: 0018_group_patch_sizes)
    ]

    operations = [
        migrations.CreateModel(
            name="EvidenceRun",
            fields=[
                ("key", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("outcome", models.JSONField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name="GroupEvidence",
            fields=[
                ("group", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                               related_name="evidence", serialize=False, to="webapp.group")),
                ("status", models.CharField(choices=[("queued", "Queued"), ("running", "Running"), ("done", "Done"),
                                                     ("failed", "Failed"), ("none", "no evidence")],
                                            default="queued", max_length=16)),
                ("reason", models.TextField(blank=True,
                                            help_text="Why there is no execution evidence (status none).")),
                ("codebase", models.CharField(blank=True, help_text="The codebase's id: repo@commit or snapshot.",
                                              max_length=700)),
                ("matrix", models.JSONField(blank=True, null=True)),
                ("breaks", models.JSONField(blank=True, default=dict,
                                            help_text="{passing trajectory id: [[suite, test], ...]}: tests others "
                                                      "pass.")),
                ("flaky", models.JSONField(blank=True, default=dict,
                                           help_text="{trajectory id: why its verdict did not reproduce}.")),
                ("breaks_tests", models.BooleanField(default=False,
                                                     help_text="A passing candidate breaks tests others pass.")),
                ("spent_s", models.FloatField(default=0.0,
                                              help_text="Seconds of runs done for this pass: its budget's share "
                                                        "used.")),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("claim_token", models.CharField(blank=True, max_length=32)),
                ("error", models.TextField(blank=True)),
                ("queued_at", models.DateTimeField()),
                ("sent_at", models.DateTimeField(blank=True, null=True)),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
                ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name_plural": "group evidence",
                "indexes": [models.Index(fields=["status", "sent_at"], name="evidence_status")],
            },
        ),
    ]
