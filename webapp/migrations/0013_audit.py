# Hand-written: audit sets, auditors' verdicts and the gold set.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0012_grading_cancelled'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditSet',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200, unique=True)),
                ('grader_version', models.CharField(blank=True, help_text='Only gradings by this version.',
                                                    max_length=200)),
                ('design', models.JSONField(default=dict)),
                ('size', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('batch', models.ForeignKey(
                    blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='audit_sets',
                    to='webapp.batch',
                    help_text='The batch sampled; empty for a set over a grader version in every batch.')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                                 related_name='+', to=settings.AUTH_USER_MODEL)),
                ('run', models.ForeignKey(
                    blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='audit_sets',
                    to='webapp.gradingrun',
                    help_text="The grading run audited; empty: each group's latest finished grading.")),
            ],
            options={
                'ordering': ['-created_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='AuditItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveIntegerField(
                    help_text='1, 2, ... in the order auditors are given the items.')),
                ('grading', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='audit_items',
                                              to='webapp.grading')),
                ('group', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='audit_items',
                                            to='webapp.group')),
                ('audit_set', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                                related_name='items', to='webapp.auditset')),
            ],
            options={
                'ordering': ['audit_set', 'position'],
            },
        ),
        migrations.CreateModel(
            name='AuditVerdict',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('verdict', models.CharField(choices=[('correct', 'correct'), ('partly', 'partly correct'),
                                                      ('wrong', 'wrong')], max_length=16)),
                ('categories', models.JSONField(blank=True, default=list,
                                                help_text="Category values, in Category's order.")),
                ('notes', models.TextField(blank=True)),
                ('corrected_version', models.PositiveIntegerField(
                    blank=True, null=True,
                    help_text="The auditor's corrected ranking: a version of the group's annotations.")),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('auditor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT,
                                              related_name='audit_verdicts', to=settings.AUTH_USER_MODEL)),
                ('item', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                           related_name='verdicts', to='webapp.audititem')),
            ],
        ),
        migrations.CreateModel(
            name='GoldGroup',
            fields=[
                ('group', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                               related_name='gold', serialize=False, to='webapp.group')),
                ('annotation_version', models.PositiveIntegerField(help_text='The human ranking verified.')),
                ('marked_at', models.DateTimeField()),
                ('marked_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+',
                                                to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.AddConstraint(
            model_name='audititem',
            constraint=models.UniqueConstraint(fields=('audit_set', 'group'), name='unique_audit_item_group'),
        ),
        migrations.AddConstraint(
            model_name='audititem',
            constraint=models.UniqueConstraint(fields=('audit_set', 'position'), name='unique_audit_item_position'),
        ),
        migrations.AddConstraint(
            model_name='auditverdict',
            constraint=models.UniqueConstraint(fields=('item', 'auditor'), name='one_verdict_per_item_and_auditor'),
        ),
    ]
