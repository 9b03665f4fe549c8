# Training runs (webapp/models/runs.py); the batches named `<run>/step-<n>`, as the online step API
# named them before runs existed, become the steps of their run; every batch's figures are
# requested, for the figures' sweep to compute.

import re

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


STEP_NAME = re.compile(r"(?P<run>[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]{0,149})/step-(?P<number>0|[1-9][0-9]{0,11})")


def attach_steps(apps, schema_editor):
    Batch = apps.get_model("webapp", "Batch")
    Run = apps.get_model("webapp", "Run")
    RunStep = apps.get_model("webapp", "RunStep")
    BatchFigures = apps.get_model("webapp", "BatchFigures")
    runs = {}
    for batch in Batch.objects.order_by("created_at", "pk").only("pk", "name", "created_at", "created_by"):
        match = STEP_NAME.fullmatch(batch.name)
        if match is None:
            continue
        name, number = match["run"], int(match["number"])
        if name not in runs:
            runs[name] = Run.objects.create(name=name, created_by_id=batch.created_by_id)
            Run.objects.filter(pk=runs[name].pk).update(created_at=batch.created_at)
        step = RunStep.objects.create(run=runs[name], number=number, batch_id=batch.pk)
        RunStep.objects.filter(pk=step.pk).update(created_at=batch.created_at)
    now = django.utils.timezone.now()
    BatchFigures.objects.bulk_create([BatchFigures(batch_id=pk, requested_at=now)
                                      for pk in Batch.objects.values_list("pk", flat=True)], batch_size=2000)


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0018_group_patch_sizes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='BatchFigures',
            fields=[
                ('batch', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='figures', serialize=False, to='webapp.batch')),
                ('measures', models.JSONField(blank=True, help_text='Empty until first computed.', null=True)),
                ('series', models.JSONField(blank=True, help_text='Each chart line\'s value, by line key: what the run page reads (webapp.runs.selectors.series_row).', null=True)),
                ('panel', models.JSONField(blank=True, null=True)),
                ('computed_at', models.DateTimeField(blank=True, null=True)),
                ('requested_at', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, help_text='When the last recompute message went out.', null=True)),
                ('error', models.TextField(blank=True, help_text='Why the last recompute failed; empty when it did not.')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('requested_at__isnull', False)), fields=['requested_at'], name='batch_figures_requested')],
            },
        ),
        migrations.CreateModel(
            name='Run',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=150, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='RunStep',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveBigIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('answered_at', models.DateTimeField(blank=True, null=True)),
                ('pruned_at', models.DateTimeField(blank=True, help_text='When its transcripts, renders and search entries were removed (manage.py prune).', null=True)),
                ('batch', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='run_step', to='webapp.batch')),
                ('run', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='webapp.run')),
            ],
            options={
                'ordering': ['run', 'number'],
                'constraints': [models.UniqueConstraint(fields=('run', 'number'), name='unique_step_in_run')],
            },
        ),
        migrations.RunPython(attach_steps, migrations.RunPython.noop),
    ]
