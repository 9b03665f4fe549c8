"""On PostgreSQL, the unique (group, trajectory id) index covers reward and passed as well.

An export reads (group, trajectory id, reward, passed) of every trajectory it writes; with the
index covering them, PostgreSQL answers from the index alone (an index-only scan) instead of
visiting each row in the heap, whose rows are wide (patch, metrics, tests). Halves the read of
a run's export. The constraint keeps its name and its columns: only the index under it
changes. Django's own `include` would not do: on SQLite, which has no covering indexes, it
leaves the constraint out altogether.
"""

from django.db import migrations

COVERING = ("ALTER TABLE webapp_trajectory DROP CONSTRAINT unique_trajectory_in_group, "
            "ADD CONSTRAINT unique_trajectory_in_group UNIQUE (group_id, trajectory_id) INCLUDE (reward, passed)")
PLAIN = ("ALTER TABLE webapp_trajectory DROP CONSTRAINT unique_trajectory_in_group, "
         "ADD CONSTRAINT unique_trajectory_in_group UNIQUE (group_id, trajectory_id)")


def run_on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("webapp", "0020_evidence"),
    ]

    operations = [
        migrations.RunPython(run_on_postgresql(COVERING), run_on_postgresql(PLAIN)),
    ]
