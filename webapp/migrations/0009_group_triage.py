# Hand-written: the triage summary of each group (webapp.triage), filled for existing groups.

from django.db import migrations, models

CHUNK = 2000


def fill(apps, schema_editor):
    # Through webapp.triage, the summary's one writer: its reads name their columns, so
    # columns that later migrations add do not break this step on an older database; the
    # patch sizes are 0018's to fill (their columns do not exist yet).
    from webapp.triage import triage_refresh

    pks = list(apps.get_model("webapp", "Group").objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(pks), CHUNK):
        triage_refresh(pks[start:start + CHUNK], sizes=False)


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0008_export_leases_and_outbox'),
    ]

    operations = [
        migrations.AddField(
            model_name='group',
            name='grader_top',
            field=models.JSONField(blank=True, help_text="Ids in the grader's top tier; null: ungraded.", null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='grader_top_flags',
            field=models.TextField(blank=True, db_default='', default='',
                                   help_text="Flags on the grader's top tier, as ',a,b,'."),
        ),
        migrations.AddField(
            model_name='group',
            name='any_flags',
            field=models.TextField(blank=True, db_default='', default='',
                                   help_text="Flags anyone put anywhere in the group, as ',a,b,'."),
        ),
        migrations.AddField(
            model_name='group',
            name='grading_confidence',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='agreement',
            field=models.FloatField(blank=True, help_text='Lowest Kendall tau-b, annotator vs grader.', null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='human_disagrees',
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='review_state',
            field=models.CharField(db_default='unreviewed', default='unreviewed',
                                   help_text='One of webapp.triage.REVIEW_STATES.', max_length=16),
        ),
        migrations.AddIndex(
            model_name='group',
            index=models.Index(fields=['batch', 'grading_confidence', 'id'], name='group_triage_confidence'),
        ),
        migrations.AddIndex(
            model_name='group',
            index=models.Index(fields=['batch', 'agreement', 'id'], name='group_triage_agreement'),
        ),
        migrations.AddIndex(
            model_name='group',
            index=models.Index(fields=['batch', 'review_state', 'group_id'], name='group_triage_state'),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
