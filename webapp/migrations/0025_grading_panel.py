# The grading panel's figures are the grading feature's own (issue 34): stored apart from the run
# page's (`GradingPanel`, computed by webapp.grading.figures), each batch's as they stood, with
# the state of their recompute.

import django.db.models.deletion
from django.db import migrations, models


def copy_panels(apps, schema_editor):
    BatchFigures = apps.get_model("webapp", "BatchFigures")
    GradingPanel = apps.get_model("webapp", "GradingPanel")
    rows = BatchFigures.objects.values_list("batch_id", "panel", "computed_at", "requested_at", "sent_at", "error")
    GradingPanel.objects.bulk_create(
        [GradingPanel(batch_id=batch_id, figures=panel, computed_at=computed, requested_at=requested, sent_at=sent,
                      error=error) for batch_id, panel, computed, requested, sent, error in rows.iterator()],
        batch_size=2000)


def copy_panels_back(apps, schema_editor):
    BatchFigures = apps.get_model("webapp", "BatchFigures")
    GradingPanel = apps.get_model("webapp", "GradingPanel")
    for batch_id, figures in GradingPanel.objects.filter(figures__isnull=False).values_list("batch_id", "figures").iterator():
        BatchFigures.objects.filter(batch_id=batch_id).update(panel=figures)


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0024_export_format_from_registry'),
    ]

    operations = [
        migrations.CreateModel(
            name='GradingPanel',
            fields=[
                ('batch', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='grading_panel', serialize=False, to='webapp.batch')),
                ('figures', models.JSONField(blank=True, help_text='Empty until first computed.', null=True)),
                ('computed_at', models.DateTimeField(blank=True, null=True)),
                ('requested_at', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, help_text='When the last recompute message went out.', null=True)),
                ('error', models.TextField(blank=True, help_text='Why the last recompute failed; empty when it did not.')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('requested_at__isnull', False)), fields=['requested_at'], name='grading_panel_requested')],
            },
        ),
        migrations.RunPython(copy_panels, copy_panels_back),
        migrations.RemoveField(
            model_name='batchfigures',
            name='panel',
        ),
    ]
