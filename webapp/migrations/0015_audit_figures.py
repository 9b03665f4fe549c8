# Hand-written: the audit dashboard's figures, computed by a worker and stored for every web process.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0014_reference_proxy'),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditFigures',
            fields=[
                ('key', models.CharField(help_text="kind:batch pk or 'all':version", max_length=300,
                                         primary_key=True, serialize=False)),
                ('kind', models.CharField(max_length=16)),
                ('batch', models.ForeignKey(blank=True, help_text='Empty: over every batch.', null=True,
                                            on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                            to='webapp.batch')),
                ('version', models.CharField(blank=True, help_text='The grader version; empty for the drift.',
                                             max_length=200)),
                ('watermark', models.CharField(blank=True, max_length=64)),
                ('payload', models.JSONField(help_text='The figures; empty until first computed.', null=True)),
                ('computed_at', models.DateTimeField(null=True)),
                ('requested_at', models.DateTimeField(help_text='Set while a recompute is queued; the sweep sends '
                                                               'again when it is over a minute old.', null=True)),
            ],
        ),
    ]
