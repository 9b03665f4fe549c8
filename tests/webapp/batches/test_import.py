import json
import os
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from grading.rollouts import RolloutFormatError, legacy_content_hash, load_rollouts
from tests.factories import SAMPLE_ROLLOUTS, group, rollout, write_jsonl
from webapp.api.services import api_token_create
from webapp.batches.services import _in_background, batch_import
from webapp.models import Batch, Group, Trajectory, Transcript

pytestmark = pytest.mark.django_db


def import_rollouts(*paths, batch="b1", **options):
    call_command("import_rollouts", *map(str, paths), batch=batch, **options)


def test_it_imports_groups_with_labels_and_counts(tmp_path, capsys):
    records = group("mixed", [1, 0, 1]) + group("pass", [1, 1]) + group("fail", [0, 0]) + group("one", [1])
    import_rollouts(write_jsonl(tmp_path / "r.jsonl", records))

    batch = Batch.objects.get(name="b1")
    assert (batch.n_groups, batch.n_trajectories, batch.n_passed) == (4, 8, 5)
    labels = dict(Group.objects.values_list("group_id", "label"))
    assert labels == {"mixed": "mixed", "pass": "all_pass", "fail": "all_fail", "one": "singleton"}
    mixed = Group.objects.get(group_id="mixed")
    assert (mixed.n_trajectories, mixed.n_passed, mixed.statement) == (3, 2, "Fix mixed")
    out = capsys.readouterr().out
    assert "4 new groups, 8 new trajectories" in out
    assert "mixed 1, all_pass 1, all_fail 1, singleton 1" in out
    assert "pass rate 62.5%" in out


def test_it_imports_the_project_sample():
    import_rollouts(SAMPLE_ROLLOUTS, batch="sample")
    batch = Batch.objects.get(name="sample")
    assert batch.n_groups >= 8
    assert set(Group.objects.values_list("label", flat=True)) == {"mixed", "all_pass", "all_fail", "singleton"}
    assert Transcript.objects.count() == batch.n_trajectories


def test_it_reads_gzip_and_zstd(tmp_path):
    import_rollouts(
        write_jsonl(tmp_path / "a.jsonl.gz", group("ga", [1, 0])),
        write_jsonl(tmp_path / "b.jsonl.zst", group("gb", [0, 1])),
    )
    assert Trajectory.objects.count() == 4


def test_reimporting_identical_content_is_a_noop(tmp_path, capsys):
    path = write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0]))
    import_rollouts(path)
    import_rollouts(path, append=True)
    assert Trajectory.objects.count() == 2
    assert "nothing new, 2 trajectories already imported" in capsys.readouterr().out


def test_conflicting_content_for_an_existing_trajectory_is_an_error_and_changes_nothing(tmp_path):
    import_rollouts(write_jsonl(tmp_path / "a.jsonl", group("g", [1, 0])))
    changed = group("g", [1, 0])
    changed[1]["patch"] = "diff --git a/x b/x\n"
    with pytest.raises(CommandError, match=r"b\.jsonl:2: trajectory_id: conflicts with the content"):
        import_rollouts(write_jsonl(tmp_path / "b.jsonl", changed), append=True)
    assert Trajectory.objects.get(trajectory_id="t2").patch != "diff --git a/x b/x\n"


def test_adding_a_trajectory_to_an_imported_group_is_refused(tmp_path):
    import_rollouts(write_jsonl(tmp_path / "a.jsonl", group("g", [1, 0])))
    with pytest.raises(CommandError, match="group already imported"):
        import_rollouts(write_jsonl(tmp_path / "b.jsonl", [rollout("g", "t9", 1.0)]), append=True)
    assert Trajectory.objects.count() == 2


def test_a_new_file_can_add_groups_to_a_batch(tmp_path):
    import_rollouts(write_jsonl(tmp_path / "a.jsonl", group("g1", [1, 0])))
    import_rollouts(write_jsonl(tmp_path / "b.jsonl", group("g2", [1, 1])), append=True)
    batch = Batch.objects.get()
    assert (batch.n_groups, batch.n_trajectories, batch.sources) == (2, 4, ["a.jsonl", "b.jsonl"])


def test_importing_into_an_existing_batch_needs_append(tmp_path):
    # Regression: a second import under the same name silently added to that batch.
    import_rollouts(write_jsonl(tmp_path / "a.jsonl", group("g1", [1, 0])))
    with pytest.raises(CommandError, match=r"--batch: batch: batch 'b1' already exists; to add these rollouts "
                                           r"to it, import with --append"):
        import_rollouts(write_jsonl(tmp_path / "b.jsonl", group("g2", [1, 1])))
    batch = Batch.objects.get()
    assert (batch.n_groups, batch.sources) == (1, ["a.jsonl"])


def test_a_bad_line_anywhere_imports_nothing(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", group("g1", [1, 0] * 3000))  # spans several chunks
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rollout("g2", "t1")) + "\n{not json\n")
    with pytest.raises(CommandError, match=r"bad\.jsonl:2"):
        import_rollouts(good, bad)
    assert not Batch.objects.exists()
    assert not Trajectory.objects.exists()


def test_every_error_is_reported_not_just_the_first(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [rollout("g", "t1", "high"), rollout("g", "t2"), {"group_id": "g", "reward": 1, "patch": ""}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(CommandError) as raised:
        import_rollouts(path)
    message = str(raised.value)
    assert "r.jsonl:1: reward:" in message
    assert "r.jsonl:3: trajectory_id:" in message


def test_a_task_on_a_later_line_is_kept(tmp_path):
    records = group("g", [0, 1])
    records[1]["task"] = records[0].pop("task")
    import_rollouts(write_jsonl(tmp_path / "r.jsonl", records))
    assert Group.objects.get().statement == "Fix g"


def test_transcripts_are_stored_apart_from_trajectories(tmp_path):
    messages = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "done"}]
    import_rollouts(write_jsonl(tmp_path / "r.jsonl", [rollout(messages=messages), rollout(trajectory_id="t2")]))
    assert Transcript.objects.get().messages == messages
    assert Transcript.objects.get().trajectory.trajectory_id == "t1"


def test_a_missing_batch_name_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="batch name is required"):
        import_rollouts(write_jsonl(tmp_path / "r.jsonl", group("g", [1])), batch="  ")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("x" * 201, "is 201 characters long, over the limit of 200"),
        ("a\x00b", "must not contain control characters"),
        ("a\tb", "must not contain control characters"),
        ("line\nbreak", "must not contain control characters"),
        ("a\x7fb", "must not contain control characters"),
        ("a\x85b", "must not contain control characters"),
        ("a\udcffb", "must not contain unpaired surrogates (bytes that are not UTF-8)"),
        (" \t ", "a batch name is required"),
    ],
)
def test_a_bad_batch_name_is_refused_before_anything_is_written(tmp_path, name, reason):
    path = write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0]))
    with pytest.raises(RolloutFormatError) as raised:
        batch_import(paths=[path], batch_name=name)
    assert str(raised.value) == f"--batch: batch: {reason}"
    assert not Batch.objects.exists()


@pytest.mark.parametrize("name", ["x" * 200, "  run-7/step-120 · ünïcode ✓  "])
def test_a_batch_name_up_to_the_column_length_is_kept_as_given_less_outer_spaces(tmp_path, name):
    batch_import(paths=[write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0]))], batch_name=name)
    assert Batch.objects.get().name == name.strip()


def test_the_command_reports_a_bad_batch_name(tmp_path):
    with pytest.raises(CommandError, match="nothing imported:\n--batch: batch: must not contain control"):
        import_rollouts(write_jsonl(tmp_path / "r.jsonl", group("g", [1])), batch="a\nb")


def test_a_file_whose_name_is_not_utf8_is_refused_with_the_bad_batch_name(tmp_path):
    path = write_jsonl(tmp_path / os.fsdecode(b"r\xff.jsonl"), group("g", [1, 0]))
    with pytest.raises(CommandError) as raised:
        import_rollouts(path, batch="a\tb")
    assert str(raised.value) == (
        "nothing imported:\n--batch: batch: must not contain control characters\n"
        f"{tmp_path}/r\\udcff.jsonl: file: name is not valid UTF-8; rename the file"
    )
    assert not Batch.objects.exists()


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (rollout(**{"x\x00y": 1}), "x\\u0000y"),
        (rollout(meta={"a\x00": 1}), "meta.a\\u0000"),
        (group("g", [1])[0] | {"task": {"statement": "s", "k\x00": 1}}, "task.k\\u0000"),
        (rollout(messages=[{"role": "user", "content": "c", "x\x00": 1}]), "messages[0].x\\u0000"),
    ],
)
def test_a_nul_in_a_key_is_reported_by_line_and_field_and_nothing_is_stored(tmp_path, record, field):
    with pytest.raises(CommandError) as raised:
        import_rollouts(write_jsonl(tmp_path / "r.jsonl", [record]))
    assert str(raised.value).endswith(
        f"r.jsonl:1: {field}: name contains a NUL character (\\u0000), which the database cannot store"
    )
    assert not Batch.objects.exists()


def test_a_reward_beyond_the_float_range_is_named_out_of_range(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(rollout()).replace("1.0", "1e400") + "\n")
    with pytest.raises(CommandError, match=r"r\.jsonl:1: reward: 1e400 is out of range for a float$"):
        import_rollouts(path)


@pytest.mark.parametrize("again", ["r.jsonl", "./r.jsonl", "link.jsonl"])
def test_the_same_file_given_twice_is_refused_and_nothing_is_stored(tmp_path, monkeypatch, again):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "r.jsonl", group("g", [1, 0]))
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "r.jsonl")
    with pytest.raises(CommandError) as raised:
        import_rollouts("r.jsonl", again)
    assert str(raised.value) == (
        f"nothing imported:\n{again}: file: is the same file as r.jsonl, given before; give each file once"
    )
    assert not Batch.objects.exists()


def test_a_large_import_reports_progress_and_stores_every_row_once(tmp_path):
    records = [r for g in range(700) for r in group(f"g{g}", [1, 0, 0])]  # 2,100: two chunks
    seen = []
    result = batch_import(paths=[write_jsonl(tmp_path / "r.jsonl", records)], batch_name="big",
                          on_progress=seen.append)
    assert seen == [2000, 2100]
    assert (result.new_groups, result.new_trajectories) == (700, 2100)
    assert Trajectory.objects.count() == 2100
    assert Group.objects.filter(n_trajectories=3, n_passed=1, label="mixed").count() == 700


def test_the_background_reader_yields_everything_in_order_and_passes_errors_on():
    assert list(_in_background(iter(range(100)))) == list(range(100))

    def failing():
        yield 1
        raise ValueError("bad read")

    got = []
    with pytest.raises(ValueError, match="bad read"):
        for item in _in_background(failing()):
            got.append(item)
    assert got == [1]


def test_the_background_reader_stops_when_the_caller_stops():
    produced = []

    def endless():
        while True:
            produced.append(len(produced))
            yield produced[-1]

    reader = _in_background(endless(), depth=2)
    assert next(reader) == 0
    reader.close()  # the caller fails or stops early: the thread is joined
    assert all(t.name != "import-reader" for t in threading.enumerate())
    assert len(produced) <= 5  # the item taken, the queue's two, one put while draining, one more


def test_values_beyond_64_bits_and_non_ascii_text_are_stored_as_given(tmp_path):
    # orjson, the fast path, takes neither integers beyond 64 bits nor writes them.
    big = rollout(meta={"seed": 2**70, "note": "naïve ✓"})
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(big, ensure_ascii=False) + "\n", encoding="utf-8")
    import_rollouts(path)
    assert Trajectory.objects.get().meta == {"seed": 2**70, "note": "naïve ✓"}
    import_rollouts(path, append=True)  # the same content hashes the same: a no-op
    assert Trajectory.objects.count() == 1


def test_a_batch_hashed_before_orjson_still_reimports_as_unchanged(tmp_path, capsys):
    # The json module writes 1.5e-05 where orjson writes 1.5e-5: the hashes differ.
    path = write_jsonl(tmp_path / "r.jsonl", [rollout(metrics={"cost_usd": 1.5e-05})])
    import_rollouts(path)
    (old,) = load_rollouts([path])
    assert legacy_content_hash(old) != old.content_hash
    Trajectory.objects.update(content_hash=legacy_content_hash(old))  # as imported before
    import_rollouts(path, append=True)
    assert "nothing new, 1 trajectories already imported" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["a%00b", "a%09b", "a%0Ab"])
def test_the_api_gives_the_imports_answer_for_a_bad_batch_name(client, researcher, name):
    headers = {"Authorization": f"Bearer {api_token_create(user=researcher, name='test')[1]}"}
    body = "".join(json.dumps(r) + "\n" for r in group("g", [1, 0])).encode()
    upload = client.post(f"/api/batches?name={name}", body, content_type="application/x-ndjson", headers=headers)
    lookup = client.get(f"/api/batches?name={name}", headers=headers)
    for response in (upload, lookup):
        assert (response.status_code, response.json()["errors"]) == (
            422, ["query.name: Value error, must not contain control characters"])
    assert not Batch.objects.exists()
