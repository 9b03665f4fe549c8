# Hand-written: on PostgreSQL, an index that orders a batch's group ids by code point.
#
# The advantages export reads a batch's groups in code point order (`COLLATE "C"`), so
# that PostgreSQL gives the same rows in the same order as SQLite; the unique
# (batch, group_id) index is in the database's collation and cannot serve that order,
# which made every chunk sort all of a batch's groups. SQLite compares text byte by byte
# already, and its unique index serves the order: nothing to do there.

from django.db import migrations

INDEX = "webapp_group_batch_code_point"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(apps.get_model("webapp", "Group")._meta.db_table)
        schema_editor.execute(f'CREATE INDEX {INDEX} ON {table} (batch_id, (group_id COLLATE "C"))')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX {INDEX}")


class Migration(migrations.Migration):

    dependencies = [
        ('webapp', '0015_audit_figures'),
    ]

    operations = [
        migrations.RunPython(create, drop),
    ]
