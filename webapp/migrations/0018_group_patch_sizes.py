# The grader beside its baselines on the batch page (webapp.triage.patch_sizes): the patch-size
# fields of the triage summary, filled for the groups that have a finished grading.

from django.db import migrations, models

CHUNK = 2000


def fill(apps, schema_editor):
    # Through webapp.triage, the summary's one writer, as 0009 fills the rest of it.
    from webapp.triage import triage_refresh

    graded = apps.get_model("webapp", "Grading").objects.filter(status="done")
    pks = sorted(set(graded.values_list("group_id", flat=True)))
    for start in range(0, len(pks), CHUNK):
        triage_refresh(pks[start:start + CHUNK])


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0017_advantage_config_explicit_flag_cap'),
    ]

    operations = [
        migrations.AddField(
            model_name='group',
            name='lines_over_shortest',
            field=models.PositiveIntegerField(blank=True, help_text='top_lines less the fewest changed lines of a patch the grader ranked.', null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='sizes_grading',
            field=models.BigIntegerField(blank=True, help_text='The grading the three fields above were computed from.', null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='top_is_consensus',
            field=models.BooleanField(blank=True, help_text='The top tier holds the change most ranked trajectories made; null: none made twice.', null=True),
        ),
        migrations.AddField(
            model_name='group',
            name='top_lines',
            field=models.PositiveIntegerField(blank=True, help_text="Changed lines of the grader's top pick (its tier's fewest).", null=True),
        ),
        migrations.AddIndex(
            model_name='group',
            index=models.Index(fields=['batch', 'lines_over_shortest', 'id'], name='group_triage_lines'),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=True),
    ]
