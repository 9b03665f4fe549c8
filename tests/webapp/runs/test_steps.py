"""A step comes in through `import_rollouts --run NAME --step N` (the API's way is in
tests/webapp/api/test_runs.py): the run is made on first use, names are checked, and a step
that repeats or goes backwards is refused, naming the step it collides with, unless --append."""

import pytest
from django.core.management import CommandError, call_command

from tests.factories import group, write_jsonl
from tests.webapp.runs.rundata import import_step, step_records
from webapp.models import Batch, Run, RunStep
from webapp.runs.services import StepRefused, step_import

pytestmark = pytest.mark.django_db


def test_steps_attach_to_the_run_made_on_first_use(tmp_path):
    first = import_step(tmp_path, "trl-example", 0, step_records(0))
    second = import_step(tmp_path, "trl-example", 1, step_records(1))
    run = Run.objects.get(name="trl-example")
    assert list(run.steps.order_by("number").values_list("number", "batch_id")) == [(0, first.pk), (1, second.pk)]
    assert first.name == "trl-example/step-0"


def test_a_repeated_step_is_refused_naming_it_unless_appended(tmp_path):
    import_step(tmp_path, "r", 0, step_records(0))
    with pytest.raises(CommandError, match=r"run 'r' already has step 0 \(batch 'r/step-0'\); --append to add to it"):
        import_step(tmp_path, "r", 0, step_records(0))
    more = group("extra", [1.0, 0.0])
    batch = import_step(tmp_path, "r", 0, more, append=True)
    assert batch.n_groups == 7 and RunStep.objects.filter(run__name="r").count() == 1


def test_a_step_below_the_latest_is_refused_naming_the_latest(tmp_path):
    import_step(tmp_path, "r", 5, step_records(5))
    with pytest.raises(CommandError, match=r"step 3 goes backwards: run 'r' is at step 5 \(batch 'r/step-5'\)"):
        import_step(tmp_path, "r", 3, step_records(3))
    assert not Batch.objects.filter(name="r/step-3").exists()
    import_step(tmp_path, "r", 3, step_records(3), append=True)  # filling in an earlier step, asked for
    assert sorted(RunStep.objects.values_list("number", flat=True)) == [3, 5]


@pytest.mark.parametrize("name, reason", [
    ("bad\x07name", "run: must not contain control characters"),
    (" padded", "run: must not start or end with spaces"),
    ("x" * 151, "run: is 151 characters long, over the limit of 150"),
])
def test_bad_run_names_are_refused_and_leave_nothing(tmp_path, name, reason):
    with pytest.raises(CommandError, match=reason):
        import_step(tmp_path, name, 0, step_records(0))
    assert not Run.objects.exists() and not Batch.objects.exists()


def test_a_bad_line_leaves_no_run_step_or_batch(tmp_path):
    records = step_records(0)
    del records[3]["reward"]
    with pytest.raises(CommandError, match=r"-0.jsonl:4: reward: missing"):
        import_step(tmp_path, "r", 0, records)
    assert not RunStep.objects.exists() and not Batch.objects.exists()


def test_run_and_step_go_together_and_exclude_batch(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", step_records(0))
    with pytest.raises(CommandError, match="--run and --step go together"):
        call_command("import_rollouts", str(path), run="r", verbosity=0)
    with pytest.raises(CommandError, match="give either --batch, or --run and --step"):
        call_command("import_rollouts", str(path), run="r", step=0, batch="b", verbosity=0)


def test_a_retry_is_a_no_op_only_where_asked(tmp_path):
    """The API takes identical content sent again as a client's retry; different content is refused."""
    path = write_jsonl(tmp_path / "a.jsonl", step_records(0))

    def importer(records_path):
        def import_batch(name, extend):
            from webapp.batches.services import batch_import
            return batch_import(paths=[records_path], batch_name=name, append=extend)
        return import_batch

    step_import(run_name="r", number=0, append=False, import_batch=importer(path))
    again = step_import(run_name="r", number=0, append=False, retry_ok=True, import_batch=importer(path))
    assert again.result.new_trajectories == 0 and not again.created
    other = write_jsonl(tmp_path / "b.jsonl", group("other", [1.0, 0.0]))
    with pytest.raises(StepRefused, match=r"already has step 0 .*\(what was sent differs from what it holds\)"):
        step_import(run_name="r", number=0, append=False, retry_ok=True, import_batch=importer(other))
    assert not Batch.objects.get(name="r/step-0").groups.filter(group_id="other").exists()


def test_a_new_step_holding_only_an_earlier_steps_rollouts_says_so(tmp_path, capsys):
    import_step(tmp_path, "r", 0, step_records(0))
    capsys.readouterr()
    path = write_jsonl(tmp_path / "again.jsonl", step_records(0))
    call_command("import_rollouts", str(path), run="r", step=1)
    out = capsys.readouterr().out
    assert ("every rollout of step 1 is already in step 0 (batch 'r/step-0') with the same content: the same file "
            "imported again?") in out
    call_command("import_rollouts", str(write_jsonl(tmp_path / "new.jsonl", step_records(2))), run="r", step=2)
    assert "already in step" not in capsys.readouterr().out  # new rollouts: nothing to say
