"""The grader SFT export against a real database: which groups go out, what an example is
(checked by the real worker grading through the agentic grader), the split, near duplicates,
preference pairs, the datasheet, reproducible bytes, and bad input."""

import hashlib
import json
import math

import pytest

from grading.backends import Backend, Reply
from grading.cases import GroupCase, TrajectoryCase
from grading.rankings import FLAGS
from grading.sft import MISSING_RATIONALE, same_ranking, swapped, workspace_for
from tests.django_fixtures import make_user
from tests.grading import agentic_fixtures
from tests.webapp.annotationdata import GRADER_TIERS, grade, save, set_policy
from tests.webapp.reviewdata import SHORT_PAYLOAD, hostile_records, import_batch, records
from webapp.annotation.services import ranking_revert
from webapp.exports.sft import (
    DATASHEET,
    EXAMPLES,
    NOT_ACCEPTED,
    PAIRS,
    REGRADED,
    parse_sft_options,
    write_sft,
)
from webapp.grading.worker import gradings_process
from webapp.models import Grading, GradingRun, Group
from webapp.rankings import UNRESTRICTED, final_rankings
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db
tiny_model = agentic_fixtures.tiny_model

PASSING = ("t1", "t2", "t3", "t4", "t5")
RATIONALES = {tid: f"{tid} changes pkg/mod.py:2 only" for tid in PASSING}
HUMAN = [["t5"], ["t1", "t2"], ["t3"], ["t4"]]
MADE = [f"task-{i}" for i in range(1, 9) if i != 2]


@pytest.fixture
def batch(tmp_path, annotator, researcher):
    """task-1..8 graded and ranked by a human (task-2 the grader's order), task-1-again a near
    duplicate of task-1, task-9 graded only, task-10 ranked without rationales, task-11
    handed back to the grader and graded again since, task-12 handed back to the grader."""
    recs = [r for i in range(1, 13) for r in records(f"task-{i}")]
    again = records("task-1-again")
    again[0]["task"]["id"] = "task-1"
    batch = import_batch(tmp_path, recs + again)
    groups = {g.group_id: g for g in Group.objects.filter(batch=batch)}
    for gid, group in groups.items():
        grade(group, rationales=RATIONALES, flags={"t4": ["debug_leftovers"]})
        if gid in (*MADE, "task-1-again"):
            save(group, annotator, HUMAN, rationales=RATIONALES, flags={"t4": ["debug_leftovers", "other"]})
    save(groups["task-2"], annotator, GRADER_TIERS, rationales={**RATIONALES, "t1": "The leanest \"fix\"."})
    save(groups["task-10"], annotator, HUMAN)
    for gid in ("task-11", "task-12"):
        save(groups[gid], annotator, HUMAN, rationales=RATIONALES)
        ranking_revert(group=groups[gid], user=researcher, to_version=0, based_on_version=1)
    grade(groups["task-11"], rationales=RATIONALES)
    return batch


def export(batch, folder, **options):
    folder.mkdir()
    return write_sft(batch, folder, viewer=UNRESTRICTED, options=parse_sft_options(options))


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def examples(folder):
    return {side: lines(folder / name) for side, name in EXAMPLES.items()}


def pairs(folder):
    return {side: lines(folder / name) for side, name in PAIRS.items()}


def test_only_groups_whose_ranking_a_human_made_or_confirmed_go_out(batch, tmp_path):
    summary = export(batch, tmp_path / "out")
    exported = {e["group_id"]: e for side in examples(tmp_path / "out").values() for e in side}
    assert sorted(exported) == sorted([*MADE, "task-2", "task-12"])
    assert {gid: e["ranking_source"] for gid, e in exported.items() if e["ranking_source"] != "human_made"} == {
        "task-2": "human_confirmed", "task-12": "human_confirmed"}
    groups = summary["groups"]
    assert (groups["in_batch"], groups["ranked_by_a_human"], groups["exported"]) == (13, 12, 9)
    assert groups["excluded"] == {MISSING_RATIONALE: ["task-10"], REGRADED: ["task-11"]}
    assert groups["near_duplicates"] == {"task-1-again": "task-1"}
    assert summary["source"] == {"human_made": 7, "human_confirmed": 2}
    assert summary["flags"] == {"debug_leftovers": 8, "other": 7}  # task-2's human gave none


def test_each_example_is_what_the_worker_shows_the_agentic_grader_and_an_answer_it_accepts(batch, tmp_path):
    export(batch, tmp_path / "out", seed=7)
    exported = [e for side in examples(tmp_path / "out").values() for e in side]
    answers = {Replay.key(e["messages"][:2]): e["messages"][2]["content"] for e in exported}
    groups = Group.objects.filter(batch=batch, group_id__in=[e["group_id"] for e in exported])
    config = {"name": "replay", "grader": "agentic", "backend": f"{__name__}:Replay", "seed": 7,
              "options": {"answers": answers}}
    run = GradingRun.objects.create(batch=batch, grader="replay", config=config, queue="cpu")
    gradings = [Grading.objects.create(run=run, group=g, queued_at=run.created_at) for g in groups]
    verified = final_rankings([g.pk for g in groups], viewer=UNRESTRICTED)  # before the new gradings land

    done = gradings_process(grading_ids=[g.pk for g in gradings])

    assert sorted(done.done) == sorted(g.pk for g in gradings)
    for grading in Grading.objects.filter(run=run).select_related("group"):
        expected = verified[grading.group.pk]
        assert same_ranking(grading.tiers, expected.tiers), grading.group.group_id
        assert {tid: tuple(f) for tid, f in grading.flags.items()} == dict(expected.flags)
    assert Grading.objects.get(run=run, group__group_id="task-2").rationales["t1"] == "The leanest 'fix'."


class Replay(Backend):
    """A model that answers each first turn with the exported answer for it; an unknown
    conversation gets text that is no action, and so fails its grading."""

    model_id = "replay"

    def __init__(self, answers: dict):
        self.answers = answers

    @staticmethod
    def key(conversation) -> str:
        return hashlib.sha256(json.dumps(list(conversation), sort_keys=True).encode()).hexdigest()

    def generate(self, conversations, schemas, sampling):
        return [Reply(self.answers.get(self.key(c), "unknown conversation"), 1, 1) for c in conversations]


def test_the_assistant_names_exactly_the_passing_labels_in_the_verified_order(batch, tmp_path):
    export(batch, tmp_path / "out", seed=3)
    for example in examples(tmp_path / "out")["train"]:
        group = Group.objects.get(batch=batch, group_id=example["group_id"])
        view_labels = example["messages"][1]["content"].split("Rank the passing ones: ")[1].split(".")[0]
        action = json.loads(example["messages"][2]["content"])
        ranked = [label for tier in action["ranking"] for label in tier]
        assert sorted(ranked) == sorted(view_labels.split(", ")) and len(ranked) == len(PASSING)
        expected = final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk].tiers
        mapping = _mapping(group, seed=3)
        assert same_ranking([[mapping[label] for label in tier] for tier in action["ranking"]], expected)
        assert example["messages"][0]["role"] == "system" and example["messages"][1]["role"] == "user"


def _mapping(group, *, seed):
    """Label -> trajectory id, as the agentic grader seeded `seed` labels `group`."""
    trajectories = tuple(TrajectoryCase(t.trajectory_id, t.passed, t.reward, t.patch, metrics=t.metrics)
                         for t in group.trajectories.order_by("trajectory_id"))
    view = GroupCase(group_id=group.group_id, statement=group.statement, repo=group.repo, trajectories=trajectories)
    return workspace_for(view, seed).mapping


def test_no_task_is_on_both_sides_and_the_split_follows_the_seed(batch, tmp_path):
    def sides(name, seed):
        export(batch, tmp_path / name, seed=seed, validation_share=0.5)
        return {side: {e["task_id"] for e in rows} for side, rows in examples(tmp_path / name).items()}

    first, again, other = sides("a", 0), sides("b", 0), sides("c", 1)
    assert first == again
    assert not first["train"] & first["validation"] and first["train"] and first["validation"]
    assert first != other and not other["train"] & other["validation"]
    tasks = first["train"] | first["validation"]
    assert tasks == other["train"] | other["validation"] == {*MADE, "task-2", "task-12"}


def test_the_task_id_decides_the_side_so_duplicated_tasks_stay_together(tmp_path, annotator):
    recs = records("g-a") + records("g-b")
    for rec in recs:
        if "task" in rec:
            rec["task"]["id"] = "shared"
    recs[6]["patch"] = recs[6]["patch"].replace("x + 1", "x + 2")  # g-b's t1 differs: not a near duplicate
    batch = import_batch(tmp_path, recs, name="shared")
    for group in Group.objects.filter(batch=batch):
        save(group, annotator, HUMAN, rationales=RATIONALES)
    summary = export(batch, tmp_path / "out", validation_share=0.5)
    assert summary["groups"]["exported"] == 2 and summary["groups"]["near_duplicates"] == {}
    by_side = examples(tmp_path / "out")
    assert sorted(len(rows) for rows in by_side.values()) == [0, 2]
    assert {e["task_id"] for rows in by_side.values() for e in rows} == {"shared"}
    looser = export(batch, tmp_path / "looser", near_duplicate_threshold=0.7)  # 3 of 4 patches alike
    assert looser["groups"]["near_duplicates"] == {"g-b": "g-a"} and looser["groups"]["exported"] == 1


def test_pairs_reject_the_graders_ranking_where_the_human_changed_it_and_a_swapped_one(batch, tmp_path):
    summary = export(batch, tmp_path / "out", seed=2)
    every = [p for side in pairs(tmp_path / "out").values() for p in side]
    by_group = {}
    for pair in every:
        by_group.setdefault(pair["group_id"], []).append(pair["rejected_from"])
    assert by_group == {**{gid: ["grader", "swap"] for gid in MADE}, "task-2": ["swap"], "task-12": ["swap"]}
    assert summary["pairs"] == {"grader": 7, "swap": 9, "grader_answer_unusable": 0}
    assert sum(row["pairs"] for row in summary["split"].values()) == 16
    sft = {e["group_id"]: e for side in examples(tmp_path / "out").values() for e in side}
    for pair in every:
        example = sft[pair["group_id"]]
        assert pair["prompt"] == example["messages"][:2] and pair["chosen"] == example["messages"][2:]
        assert [m["role"] for m in pair["rejected"]] == ["assistant"] and pair["rejected"] != pair["chosen"]
        group = Group.objects.get(batch=batch, group_id=pair["group_id"])
        mapping = _mapping(group, seed=2)
        ranking = json.loads(pair["rejected"][0]["content"])["ranking"]
        rejected = [[mapping[label] for label in tier] for tier in ranking]
        chosen = final_rankings([group.pk], viewer=UNRESTRICTED)[group.pk].tiers
        assert same_ranking(rejected, GRADER_TIERS if pair["rejected_from"] == "grader" else swapped(chosen))


def test_the_same_data_and_options_give_the_same_bytes(batch, tmp_path):
    first = export(batch, tmp_path / "a", seed=4, validation_share=0.3)
    second = export(batch, tmp_path / "b", seed=4, validation_share=0.3)
    assert first == second
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted([*EXAMPLES.values(), *PAIRS.values(), DATASHEET]) == sorted(first["files"])
    assert all((tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in names)
    assert all((tmp_path / "a" / n).read_bytes().isascii() for n in names)


def test_the_datasheet_gives_counts_sources_flags_exclusions_and_options(batch, tmp_path):
    export(batch, tmp_path / "out", seed=5)
    sheet = (tmp_path / "out" / DATASHEET).read_text(encoding="utf-8")
    assert '"seed": 5' in sheet and "| exported | 9 |" in sheet
    assert "(`human_made`) | 7 |" in sheet and "(`human_confirmed`) | 2 |" in sheet
    assert "| removed as near duplicates | 1 |" in sheet and '"task-1-again": "task-1"' in sheet
    assert f"## Excluded: {REGRADED}\n\n```\n\"task-11\"\n```" in sheet
    assert "- debug_leftovers: 8" in sheet and "- other: 7" in sheet


def test_progress_counts_every_group_a_human_ranked(batch, tmp_path):
    (tmp_path / "out").mkdir()
    calls = []
    write_sft(batch, tmp_path / "out", viewer=UNRESTRICTED, options=parse_sft_options({}),
              on_progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (12, 12) and [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_annotators_ranking_independently_give_agreement_and_only_accepted_groups_go_out(tmp_path, researcher):
    batch = import_batch(tmp_path, records("task-1") + records("task-2"), name="overlap")
    set_policy(batch, overlap=2)
    first, second = make_user("ann1", ANNOTATOR), make_user("ann2", ANNOTATOR)
    accepted, pending = Group.objects.get(group_id="task-1"), Group.objects.get(group_id="task-2")
    mine = save(accepted, first, HUMAN, rationales=RATIONALES)
    save(accepted, second, [["t5"], ["t2"], ["t1"], ["t3", "t4"]], rationales=RATIONALES)
    save(pending, first, HUMAN, rationales=RATIONALES)
    ranking_revert(group=accepted, user=researcher, to_version=mine.version, based_on_version=0)
    summary = export(batch, tmp_path / "out")
    assert summary["groups"]["exported"] == 1 and summary["groups"]["excluded"] == {NOT_ACCEPTED: ["task-2"]}
    annotators = summary["agreement"]["annotators"]
    assert (annotators["groups"], annotators["pairs"], annotators["kendall_tau"]["n"]) == (1, 1, 1)
    assert 0 < annotators["kendall_tau"]["value"] < 1 and annotators["top1"]["value"] == 1.0
    assert summary["agreement"]["grader"]["groups"] == 0


def test_hostile_text_stays_data(tmp_path, annotator):
    batch = import_batch(tmp_path, hostile_records(), name="hostile")
    group = Group.objects.get(batch=batch)
    passing = list(group.trajectories.filter(passed=True).values_list("trajectory_id", flat=True))
    save(group, annotator, [[passing[0]], [passing[1]]], rationales={t: SHORT_PAYLOAD + "\\ \n" for t in passing})
    export(batch, tmp_path / "out", validation_share=0.5)
    example = next(e for rows in examples(tmp_path / "out").values() for e in rows)
    assert example["group_id"] == group.group_id
    action = json.loads(example["messages"][2]["content"])
    assert all(text.isascii() and '"' not in text and "\\" not in text for text in action["rationales"].values())
    assert all(flag in FLAGS for flags in action["flags"].values() for flag in flags)


def test_a_ranking_under_corrected_test_verdicts_goes_out_as_the_grader_could_answer_it(tmp_path, annotator):
    """t5 passes its tests but the human failed it, t6 fails them but the human passed it: the
    example ranks what the tests passed, t5 last with the human's reason, t6 left out."""
    batch = import_batch(tmp_path, records("task-1"), name="overrides")
    group = Group.objects.get(batch=batch)
    verdicts = {"t5": {"passed": False, "reason": "leaves <script> as a stray file"},
                "t6": {"passed": True, "reason": "the test is flaky; the fix is right"}}
    save(group, annotator, [["t6"], ["t1", "t2"], ["t3"], ["t4"]], verdicts=verdicts,
         rationales={**{tid: RATIONALES[tid] for tid in ("t1", "t2", "t3", "t4")}, "t6": "right fix"})
    summary = export(batch, tmp_path / "out", seed=3)
    [example] = [*examples(tmp_path / "out")["train"], *examples(tmp_path / "out")["validation"]]
    action = json.loads(example["messages"][2]["content"])
    mapping = _mapping(group, seed=3)
    assert [sorted(mapping[label] for label in tier) for tier in action["ranking"]] == \
        [["t1", "t2"], ["t3"], ["t4"], ["t5"]]
    label = {tid: label for label, tid in mapping.items()}
    assert action["rationales"][label["t5"]] == \
        "the tests pass, but it does not fix the task: leaves <script> as a stray file"
    assert summary["test_verdicts_corrected"] == ["task-1"] and summary["groups"]["excluded"] == {}
    assert "Rankings made under test verdicts a human corrected: 1." in (tmp_path / "out" / DATASHEET).read_text()


def test_a_batch_without_a_human_ranking_is_refused_and_nothing_is_written(tmp_path):
    batch = import_batch(tmp_path, records("task-1"), name="graded only")
    grade(Group.objects.get(batch=batch))
    (tmp_path / "out").mkdir()
    with pytest.raises(ValueError, match="has no group whose ranking a human made or confirmed"):
        write_sft(batch, tmp_path / "out", viewer=UNRESTRICTED, options={})
    assert list((tmp_path / "out").iterdir()) == []


def test_a_batch_whose_human_rankings_cannot_be_used_says_why(tmp_path, annotator):
    batch = import_batch(tmp_path, records("task-1"), name="no rationales")
    save(Group.objects.get(batch=batch), annotator, HUMAN)
    (tmp_path / "out").mkdir()
    with pytest.raises(ValueError) as refused:
        write_sft(batch, tmp_path / "out", viewer=UNRESTRICTED, options={})
    assert f"none of the 1 groups a human ranked can be exported ({MISSING_RATIONALE}: 1)" in str(refused.value)


def test_options_have_defaults_and_accept_numbers_as_text():
    assert parse_sft_options({}) == {"seed": 0, "validation_share": 0.1, "near_duplicate_threshold": 1.0}
    assert parse_sft_options({"seed": "12", "validation_share": "0.25", "near_duplicate_threshold": 0.8}) == {
        "seed": 12, "validation_share": 0.25, "near_duplicate_threshold": 0.8}


@pytest.mark.parametrize("data, message", [
    ({"sed": 1}, "sed: unknown option"),
    ({"seed": -1}, "seed: must be from 0"),
    ({"seed": 1.5}, "seed: must be a whole number"),
    ({"seed": "1.5"}, "seed: must be a whole number"),
    ({"seed": True}, "seed: must be a whole number"),
    ({"validation_share": 0}, "validation_share: must lie strictly between 0 and 1"),
    ({"validation_share": 1}, "validation_share: must lie strictly between 0 and 1"),
    ({"validation_share": "nan"}, "validation_share: must lie strictly between 0 and 1"),
    ({"validation_share": "a lot"}, "validation_share: must be a number"),
    ({"validation_share": None}, "validation_share: must be a number"),
    ({"near_duplicate_threshold": 0}, "near_duplicate_threshold: must be above 0 and at most 1"),
    ({"near_duplicate_threshold": 1.5}, "near_duplicate_threshold: must be above 0 and at most 1"),
])
def test_bad_options_are_refused_with_the_field_and_the_reason(data, message):
    with pytest.raises(ValueError, match=message):
        parse_sft_options(data)


def test_the_files_load_with_datasets_and_trls_trainers_take_them_as_they_are(batch, tmp_path, tiny_model):
    import datasets
    import trl
    from transformers import AutoTokenizer
    from trl.data_utils import apply_chat_template, is_conversational

    split = export(batch, tmp_path / "out", seed=1, validation_share=0.3)["split"]
    files = {name: str(tmp_path / "out" / name) for name in [*EXAMPLES.values(), *PAIRS.values()]}
    sft = datasets.load_dataset("json", data_files={side: files[name] for side, name in EXAMPLES.items()},
                                cache_dir=str(tmp_path / "cache"))
    dpo = datasets.load_dataset("json", data_files={side: files[name] for side, name in PAIRS.items()},
                                cache_dir=str(tmp_path / "cache"))
    assert sft.num_rows == {side: row["examples"] for side, row in split.items()} == {"train": 7, "validation": 2}
    assert dpo.num_rows == {side: row["pairs"] for side, row in split.items()} == {"train": 12, "validation": 4}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    for row in [*sft["train"], *dpo["train"]]:
        assert is_conversational(row)
    text = apply_chat_template({"messages": sft["train"][0]["messages"]}, tokenizer)["text"]
    assert text.startswith("<|system|>\nYou review") and '"tool": "submit_ranking"' in text
    pair = dpo["train"][0]
    templated = apply_chat_template({k: pair[k] for k in ("prompt", "chosen", "rejected")}, tokenizer)
    assert templated["prompt"].endswith("<|assistant|>\n") and templated["chosen"] != templated["rejected"]

    # max_length: the grader's prompt is longer than the trainers' default of 1024 tokens.
    common = {"max_steps": 1, "per_device_train_batch_size": 2, "report_to": "none", "use_cpu": True,
              "save_strategy": "no", "eval_strategy": "no", "disable_tqdm": True, "max_length": 4096}
    sft_trainer = trl.SFTTrainer(model=str(tiny_model), processing_class=tokenizer, train_dataset=sft["train"],
                                 eval_dataset=sft["validation"],
                                 args=trl.SFTConfig(output_dir=str(tmp_path / "sft"), **common))
    dpo_trainer = trl.DPOTrainer(model=str(tiny_model), processing_class=tokenizer, train_dataset=dpo["train"],
                                 eval_dataset=dpo["validation"],
                                 args=trl.DPOConfig(output_dir=str(tmp_path / "dpo"), **common))
    assert "input_ids" in sft_trainer.train_dataset.column_names
    assert {"prompt_ids", "chosen_ids", "rejected_ids"} <= set(dpo_trainer.train_dataset.column_names)
    for trainer in (sft_trainer, dpo_trainer):
        assert math.isfinite(trainer.train().training_loss)
