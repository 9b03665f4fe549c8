# Export formats are registered (issue 34, webapp/exports/formats.py): `Export.format` keeps no
# choices, so that a new format needs no migration; the launch refuses one its kind lacks. The
# column and its values stay as they were.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("webapp", "0023_evidence_probes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="export",
            name="format",
            field=models.CharField(help_text="A format of its kind, webapp/exports/formats.py.", max_length=16),
        ),
    ]
