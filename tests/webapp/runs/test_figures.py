"""A step's stored figures against an independent computation from the generated rollouts and
the rankings in the database (the core's GRPO and GAGAR, plain Python for the rest), on a
generated run with a human override and a lucky pass; the figures' lifecycle (requested,
computed, a failure recorded, the sweep) and the config change a run shows."""

import math
import statistics
from collections import Counter

import numpy as np
import pytest
from django.utils import timezone

from grading.advantages import gagar_advantages, grpo_advantages
from grading.evaluation import changed_lines
from tests.webapp.runs.rundata import make_run
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.services import advantage_config_update
from webapp.annotation.services import ranking_save
from webapp.derived import RUN_FIGURES, sweep_derived
from webapp.models import BatchFigures, Group, Run
from webapp.rankings import UNRESTRICTED, final_rankings
from webapp.runs import selectors
from webapp.runs.services import figures_refresh

pytestmark = pytest.mark.django_db


def p90(values):
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def expected(batch, records) -> dict:
    """The measures computed from `records` and the batch's final rankings, without the app's figures code."""
    config = batch.advantage_config
    pks = dict(Group.objects.filter(batch=batch).values_list("group_id", "pk"))
    finals = final_rankings(pks.values(), viewer=UNRESTRICTED)
    rows = sorted(records, key=lambda r: (r["group_id"], r["trajectory_id"]))
    by_group = {g: [r for r in rows if r["group_id"] == g] for g in sorted(pks)}
    passed, rewards, ranks, index, tested = [], [], [], [], []
    for gi, (g, members) in enumerate(by_group.items()):
        final = finals.get(pks[g])
        verdicts = final.verdicts if final else {}
        rank_of = final.ranks() if final else {}
        for r in members:
            tests = r["reward"] >= 1.0
            corrected = verdicts[r["trajectory_id"]]["passed"] if r["trajectory_id"] in verdicts else tests
            tested.append(tests)
            passed.append(corrected)
            rewards.append((1.0 if corrected else 0.0) if r["trajectory_id"] in verdicts else r["reward"])
            ranks.append(rank_of.get(r["trajectory_id"], 0))
            index.append(gi)
    capped = set(config["flag_names"])
    flagged = [rank > 0 and bool(capped & set(finals[pks[r["group_id"]]].flags.get(r["trajectory_id"], ())))
               for r, rank in zip(rows, ranks, strict=True)]
    result = gagar_advantages(np.array(rewards), np.array(index), np.array(passed), np.array(ranks),
                              schedule=config["schedule"], params=config["params"], flagged=np.array(flagged),
                              w_flag=config["w_flag"], norm_by_std=config["norm_by_std"],
                              unbiased_std=config["unbiased_std"])
    grpo = grpo_advantages(np.array(rewards), np.array(index), norm_by_std=config["norm_by_std"],
                           unbiased_std=config["unbiased_std"])
    moved = sum(abs(a - b) for a, b, p in zip(result.advantages, grpo, passed, strict=True) if p)
    mass = sum(abs(b) for b, p in zip(grpo, passed, strict=True) if p)
    k = Counter(i for i, rank in zip(index, ranks, strict=True) if rank)
    parts = {"passing": [], "best": [], "worst": [], "failing": []}
    for r, p, rank, gi in zip(rows, passed, ranks, index, strict=True):
        lines = len(changed_lines(r["patch"]))
        if not p:
            parts["failing"].append(lines)
            continue
        parts["passing"].append(lines)
        if rank and k[gi] >= 2:
            third = math.ceil(k[gi] / 3)
            if rank <= third:
                parts["best"].append(lines)
            if rank > k[gi] - third:
                parts["worst"].append(lines)
    labels = Counter("mixed" if 0 < sum(r["reward"] >= 1 for r in m) < len(m) else
                     "all_pass" if all(r["reward"] >= 1 for r in m) else "all_fail" for m in by_group.values())
    return {
        "pass_rate": sum(tested) / len(tested), "mixed_share": labels["mixed"] / len(by_group),
        "all_fail_share": labels["all_fail"] / len(by_group), "mass_moved": moved / mass,
        "lines": {part: (statistics.median(v), p90(v), len(v)) for part, v in parts.items() if v},
        "lucky": sum(t and not p for t, p in zip(tested, passed, strict=True)),
        "overrides": sum(final.source == "human" for final in finals.values()),
        "graded": sum(1 for g, m in by_group.items() if labels and 0 < sum(r["reward"] >= 1 for r in m) < len(m)),
    }


def test_the_stored_figures_equal_an_independent_computation(tmp_path, researcher):
    run = make_run(tmp_path, "gagar", steps=3)
    batch, records = run[1]
    # A human overrides a pass (a lucky pass) in a mixed group, and ranks what passes after it.
    group = Group.objects.filter(batch=batch, label="mixed").order_by("group_id").first()
    passing = [r["trajectory_id"] for r in records if r["group_id"] == group.group_id and r["reward"] >= 1]
    lucky, kept = passing[0], passing[1:]
    ranking_save(group=group, user=researcher, tiers=[[t] for t in kept], flags={}, rationales={},
                 group_rationale="", based_on_version=0, grading_id=None,
                 verdicts={lucky: {"passed": False, "reason": "the test is flaky: it passes by luck"}})
    for b, _ in run.values():
        figures_refresh(b.pk)
    for step, (b, recs) in run.items():
        measures = BatchFigures.objects.get(batch=b).measures
        want = expected(b, recs)
        assert measures["pass_rate"] == pytest.approx(want["pass_rate"], abs=1e-12), step
        assert measures["mixed_share"] == pytest.approx(want["mixed_share"], abs=1e-12), step
        assert measures["all_fail_share"] == pytest.approx(want["all_fail_share"], abs=1e-12), step
        assert measures["mass_moved"] == pytest.approx(want["mass_moved"], rel=1e-9), step
        lines = measures["lengths"]["lines"]
        for part, (median, tail, n) in want["lines"].items():
            assert (lines[part]["median"], lines[part]["n"]) == (median, n), (step, part)
            assert lines[part]["p90"] == pytest.approx(tail, abs=1e-9), (step, part)
        assert measures["lucky_passes"] == want["lucky"] and measures["overrides"] == want["overrides"], step
        assert measures["grading"]["graded"] == want["graded"] and measures["grading"]["pending"] == 0, step
        assert measures["lengths"]["num_turns"]["passing"]["n"] == want["lines"]["passing"][2], step
    assert BatchFigures.objects.get(batch=run[1][0]).measures["lucky_passes"] == 1


def test_a_baseline_run_imported_without_grading_shows_grpo_only_figures(tmp_path):
    run = make_run(tmp_path, "baseline", steps=2, graded=False, metrics=False)
    for batch, _ in run.values():
        figures_refresh(batch.pk)
    figures = selectors.run_figures(Run.objects.get(name="baseline"), viewer=UNRESTRICTED, measures=True)
    for step in figures.steps:
        assert "mass_moved" not in step.series  # nothing ranked: no mass to move, a gap on the chart
        assert step.series["grading_not_launched"] == step.measures["labels"]["mixed"] > 0
        assert "factor_median" not in step.series and step.measures["lengths"]["lines"]["best"]["n"] == 0
    shown = {m.key for m in figures.measures}
    assert {"pass_rate", "groups", "grading", "lines"} <= shown and not {"num_turns", "output_tokens"} & shown


def test_the_steps_listed_without_a_viewer_carry_none_of_their_stored_figures(tmp_path):
    run = make_run(tmp_path, "r", steps=2)
    for batch, _ in run.values():
        figures_refresh(batch.pk)
    listed = selectors.run_steps(Run.objects.get(name="r"))
    assert [step.number for step in listed] == [0, 1] and not any(step.updating for step in listed)
    assert all(set(step.series) == {"trajectories"} and (step.config, step.measures, step.error) == (None, None, "")
               for step in listed)
    shown = selectors.run_figures(Run.objects.get(name="r"), viewer=UNRESTRICTED).steps
    assert all({"pass_rate", "mass_moved"} <= set(step.series) and step.config for step in shown)


def test_a_config_change_is_marked_on_the_run(tmp_path):
    run = make_run(tmp_path, "r", steps=3, graded=False)
    advantage_config_update(batch=run[2][0],
                            config=parse_advantage_config({"schedule": "exponential", "params": {"gamma": 0.5}}))
    for batch, _ in run.values():
        figures_refresh(batch.pk)
    figures = selectors.run_figures(Run.objects.get(name="r"), viewer=UNRESTRICTED)
    [(step, text)] = figures.config_changes
    assert step == 2 and "schedule 'linear' → 'exponential'" in text


def test_a_failed_recompute_keeps_the_previous_figures_and_says_why(tmp_path, monkeypatch):
    batch, _ = make_run(tmp_path, "r", steps=1)[0]
    figures_refresh(batch.pk)
    before = BatchFigures.objects.get(batch=batch).measures
    BatchFigures.objects.filter(batch=batch).update(requested_at=timezone.now())

    def broken(self):
        raise RuntimeError("a <b>bad</b> day")

    monkeypatch.setattr("webapp.runs.figures.RunFigures.measures", broken)
    figures_refresh(batch.pk)
    row = BatchFigures.objects.get(batch=batch)
    assert row.measures == before and row.requested_at is None
    assert row.error.startswith("RuntimeError: a <b>bad</b> day")


def test_the_worker_computes_a_batchs_run_page_and_grading_panel_figures_in_one_pass(
        tmp_path, monkeypatch, django_capture_on_commit_callbacks):
    """One read of the batch's advantages for both features' figures, each the same as computed
    alone; a part that fails does so alone; one message asks for both."""
    from webapp.advantages import services
    from webapp.derived import GRADING_PANEL, batch_figures_stale
    from webapp.grading.services import PANEL, panel_refresh
    from webapp.models import GradingPanel
    from webapp.runs.services import FIGURES

    batch, _ = make_run(tmp_path, "r", steps=1)[0]
    figures_refresh(batch.pk)
    panel_refresh(batch.pk)
    alone = (BatchFigures.objects.get(batch=batch).series, GradingPanel.objects.get(batch=batch).figures)

    reads = []
    chunks = services.advantage_chunks
    monkeypatch.setattr(services, "advantage_chunks", lambda *a, **k: reads.append(1) or chunks(*a, **k))
    sent = []
    monkeypatch.setattr("webapp.derived.send", lambda task, messages, **kw: sent.append((task, messages)))
    with django_capture_on_commit_callbacks(execute=True):
        batch_figures_stale(batch.pk)
    assert sent == [("workers.tasks.batch_figures", [{"batch_id": batch.pk}])]
    assert all(work.model.objects.get(batch=batch).sent_at for work in (RUN_FIGURES, GRADING_PANEL))
    services.batch_figures_refresh(batch.pk, (FIGURES, PANEL))
    assert reads == [1]
    assert (BatchFigures.objects.get(batch=batch).series, GradingPanel.objects.get(batch=batch).figures) == alone
    assert not BatchFigures.objects.get(batch=batch).requested_at and not GradingPanel.objects.get(
        batch=batch).requested_at

    services.batch_figures_refresh(batch.pk, (FIGURES, PANEL))  # the same message again: nothing to do
    assert reads == [1]

    def broken(self, chunk):
        raise RuntimeError("the panel's bad day")

    monkeypatch.setattr("webapp.grading.figures.PanelFigures.add", broken)
    with django_capture_on_commit_callbacks(execute=True):
        batch_figures_stale(batch.pk)
    services.batch_figures_refresh(batch.pk, (FIGURES, PANEL))
    figures, panel = BatchFigures.objects.get(batch=batch), GradingPanel.objects.get(batch=batch)
    assert figures.error == "" and figures.requested_at is None and figures.series == alone[0]
    assert panel.error.startswith("RuntimeError: the panel's bad day") and panel.figures == alone[1]
    assert reads == [1, 1]


def test_the_sweep_sends_again_what_was_requested_long_ago_and_not_sent_since(tmp_path, monkeypatch):
    sent = []
    monkeypatch.setattr("webapp.derived.send", lambda task, messages, **kw: sent.extend(messages))
    batch, _ = make_run(tmp_path, "r", steps=1, graded=False)[0]
    long_ago = timezone.now() - timezone.timedelta(minutes=5)
    BatchFigures.objects.update_or_create(batch=batch, defaults={"requested_at": long_ago, "sent_at": long_ago})
    assert sweep_derived(RUN_FIGURES) == 1 and sent == [{"batch_id": batch.pk}]
    assert sweep_derived(RUN_FIGURES) == 0  # sent just now: not again until it is overdue
