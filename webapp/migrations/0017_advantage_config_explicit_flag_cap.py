# Hand-written: a stored redistribution config names its flag cap.
#
# Configs stored before flag caps existed have no `w_flag`, and they capped nothing. A config
# is now read through one parser whose only defaults are the dataclass's (a missing `w_flag`
# caps flagged trajectories at 0), so each such config gets the `null` it meant: the batch
# keeps the advantages it had.

from django.db import migrations


def name_the_cap(apps, schema_editor):
    Batch = apps.get_model("webapp", "Batch")
    for batch in Batch.objects.only("pk", "advantage_config").iterator():
        if "w_flag" not in batch.advantage_config:
            batch.advantage_config = {**batch.advantage_config, "w_flag": None}
            batch.save(update_fields=["advantage_config"])


class Migration(migrations.Migration):
    dependencies = [("webapp", "0016_group_id_code_point_index")]
    operations = [migrations.RunPython(name_the_cap, migrations.RunPython.noop)]
