"""The schema and its migrations: a database made under an earlier layout of the models
migrates forward with its data, and the models need no migration that is not written."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from webapp.models import Annotation, Batch, Grading, Group, Trajectory

# The last migration before the models became a package split by feature.
BEFORE_THE_SPLIT = [("webapp", "0004_lighter_trajectory_keys")]


@pytest.mark.django_db
def test_the_models_and_their_migrations_agree():
    out = StringIO()
    call_command("makemigrations", "webapp", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_database_from_before_the_split_migrates_forward_with_its_data():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE_THE_SPLIT)
    old = executor.loader.project_state(BEFORE_THE_SPLIT).apps
    user = old.get_model("auth", "User").objects.create(username="rita")
    batch = old.get_model("webapp", "Batch").objects.create(name="run-7/step-120", n_groups=1)
    group = old.get_model("webapp", "Group").objects.create(batch=batch, group_id="g1", label="mixed")
    for tid, reward in (("t1", 1.0), ("t2", 0.0)):
        old.get_model("webapp", "Trajectory").objects.create(
            batch=batch, group=group, trajectory_id=tid, reward=reward, passed=bool(reward), content_hash=tid)
    run = old.get_model("webapp", "GradingRun").objects.create(batch=batch, grader="heuristic", queue="cpu")
    grading = old.get_model("webapp", "Grading").objects.create(
        run=run, group=group, status="done", queued_at="2026-11-01T00:00:00Z", tiers=[["t1"]])
    old.get_model("webapp", "Annotation").objects.create(
        group=group, version=1, based_on_version=0, user=user, tiers=[["t1"]], grading=grading)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    batch = Batch.objects.get(name="run-7/step-120")
    assert batch.advantage_config["schedule"] == "linear"
    assert list(Trajectory.objects.filter(group__batch=batch).order_by("trajectory_id")
                .values_list("trajectory_id", "passed")) == [("t1", True), ("t2", False)]
    assert Grading.objects.get(group__group_id="g1").tiers == [["t1"]]
    annotation = Annotation.objects.get(group=Group.objects.get(group_id="g1"))
    assert (annotation.version, annotation.user.username, annotation.grading_id) == (1, "rita", grading.pk)


@pytest.mark.django_db(transaction=True)
def test_a_config_stored_before_flag_caps_keeps_capping_nothing():
    before = [("webapp", "0016_group_id_code_point_index")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    config = {"schedule": "linear", "params": {"w_min": 0.2}, "norm_by_std": True, "unbiased_std": True}
    old.get_model("webapp", "Batch").objects.create(name="old", n_groups=0, advantage_config=config)
    old.get_model("webapp", "Batch").objects.create(name="new", n_groups=0, advantage_config={**config, "w_flag": 0.5})
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert Batch.objects.get(name="old").advantage_config == {**config, "w_flag": None}
    assert Batch.objects.get(name="new").advantage_config["w_flag"] == 0.5


@pytest.mark.django_db(transaction=True)
def test_the_trajectory_key_stays_unique_and_on_postgresql_covers_what_exports_read():
    def definition():
        if connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'unique_trajectory_in_group'")
            return cursor.fetchone()[0]

    executor = MigrationExecutor(connection)
    executor.migrate([("webapp", "0020_evidence")])
    plain = definition()
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    if connection.vendor == "postgresql":
        assert "INCLUDE" not in plain and definition().endswith("(group_id, trajectory_id) INCLUDE (reward, passed)")
    batch = Batch.objects.create(name="b", n_groups=1)
    group = Group.objects.create(batch=batch, group_id="g1", label="mixed")
    Trajectory.objects.create(batch=batch, group=group, trajectory_id="t1", reward=1.0, passed=True, content_hash="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        Trajectory.objects.create(batch=batch, group=group, trajectory_id="t1", reward=0.0, passed=False,
                                  content_hash="b")
