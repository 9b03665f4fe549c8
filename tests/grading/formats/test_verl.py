from grading.formats.verl import GROUPING, group_id
from tests.grading.formats.formatfiles import verl_line, write_lines
from tests.grading.formats.helpers import read


def test_it_groups_samples_by_step_and_input_and_takes_score_as_the_reward(tmp_path):
    dump = write_lines(tmp_path / "12.jsonl", [
        verl_line(12, "Q1", "A", 1.0, acc=True), verl_line(12, "Q1", "B", 0.0, acc=False),
        verl_line(12, "Q2", "C", 0.5, acc=False)])
    rollouts, errors, notes = read("verl", [dump])
    assert errors == []
    q1, q2 = group_id(12, "Q1"), group_id(12, "Q2")
    assert q1.startswith("step-12/") and len(q1) == len("step-12/") + 12
    assert [(r.group_id, r.trajectory_id, r.reward, r.passed) for r in rollouts] == [
        (q1, "12.jsonl:1", 1.0, True), (q1, "12.jsonl:2", 0.0, False), (q2, "12.jsonl:3", 0.5, False)]
    assert rollouts[0].messages == [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A"}]
    assert rollouts[0].meta == {"acc": True}
    assert (rollouts[0].task.statement, rollouts[1].task) == ("Q1", None)
    assert notes.lines() == [GROUPING]


def test_it_names_the_line_and_key_of_a_bad_sample_and_never_guesses_a_score(tmp_path):
    dump = write_lines(tmp_path / "3.jsonl", [
        {"input": "Q", "output": "A", "step": 3},
        {"input": "Q", "output": "A", "step": "3", "score": True},
    ])
    _, errors, _ = read("verl", [dump])
    assert errors == [f"{dump}:1: score: missing", f"{dump}:2: score: must be a number, got true",
                      f"{dump}:2: step: must be an integer, got a string"]
