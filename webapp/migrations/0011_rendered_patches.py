# Hand-written: the render store of the group page (webapp.models.renders).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0010_search_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='PatchRender',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(max_length=32)),
                ('eager', models.BooleanField()),
                ('version', models.PositiveIntegerField()),
                ('data', models.BinaryField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('digest', 'eager', 'version'),
                                                        name='unique_patch_render')],
            },
        ),
        migrations.CreateModel(
            name='BatchPatch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(db_index=True, max_length=32)),
                ('batch', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='+', to='webapp.batch')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('batch', 'digest'), name='unique_batch_patch')],
            },
        ),
    ]
