# Execution evidence you can trust (issue 31): a pass notes what the deployment lowered of its
# task's limits per run; and the runs stored before the machine's failures were told from the
# candidates' outcomes are dropped, so that no later group reuses them (its pass runs them again).

from django.db import migrations, models
from django.db.models import Q

# What a run looked like when the machine, not the candidate, stopped it: a sandbox that could not
# start, or git dying in a copy another worker had removed ("does not apply: fatal: ...").
MACHINE_BROKEN = (Q(outcome__status="error", outcome__reason="the sandbox could not start the command")
                  | Q(outcome__status="refused", outcome__reason__startswith="does not apply: fatal:"))


def drop_machine_broken_runs(apps, schema_editor):
    apps.get_model("webapp", "EvidenceRun").objects.filter(MACHINE_BROKEN).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("webapp", "0021_trajectory_covering_unique"),
    ]

    operations = [
        migrations.AddField(
            model_name="groupevidence",
            name="lowered",
            field=models.TextField(blank=True, help_text="What this deployment lowered of the task's limits per "
                                                         "run (GAGAR_SANDBOX_MAX_...), for the group page."),
        ),
        migrations.RunPython(drop_machine_broken_runs, migrations.RunPython.noop),
    ]
