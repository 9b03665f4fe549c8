# Hand-written: each group's proxy ranking (similarity to the reference fix), stored once.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0013_audit'),
    ]

    operations = [
        migrations.CreateModel(
            name='ReferenceProxy',
            fields=[
                ('group', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                               related_name='reference_proxy', serialize=False, to='webapp.group')),
                ('tiers', models.JSONField(help_text='Trajectory ids, best first; [] when no trajectory passed.')),
            ],
        ),
    ]
