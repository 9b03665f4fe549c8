"""`manage.py evaluate_grader` on a small imported batch with reference fixes."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from grading.evaluation import PROXY_LABEL, RANDOM
from tests.factories import group, write_jsonl
from webapp.batches.services import batch_import


def diff(path, removed, added):
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(removed)} +1,{len(added)} @@\n"
            + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added))


REF = diff("m.py", ["x = 1"], ["x = 2"])


@pytest.fixture
def reference_batch(tmp_path, db):
    records = []
    for n in range(3):
        rows = group(f"g{n}", [1.0, 1.0, 1.0, 0.0])
        rows[0]["task"]["reference_patch"] = REF
        rows[0]["patch"] = REF
        rows[1]["patch"] = REF + diff("debug_script.py", [], ["print(1)"])
        rows[2]["patch"] = diff("m.py", ["x = 1"], ["x = 2", "y = 3", "z = 4"])
        records += rows
    records += group("no-reference", [1.0, 0.0])
    return batch_import(paths=[write_jsonl(tmp_path / "b.jsonl", records)], batch_name="refs")


def evaluate_grader(**options) -> str:
    out = io.StringIO()
    call_command("evaluate_grader", stdout=out, **options)
    return out.getvalue()


def test_it_prints_the_grader_and_baselines_with_intervals_against_the_proxy(reference_batch):
    out = evaluate_grader(batch="refs")
    assert "ranked in-process now by grader 'heuristic'" in out
    assert f"{PROXY_LABEL}; 3 of 3 groups with a reference fix used" in out
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    heuristic = next(line for name, line in rows.items() if name.startswith("heuristic (heuristic-1-"))
    assert "+1.00 [+1.00, +1.00]" in heuristic and "1.00 [1.00, 1.00]" in heuristic
    for name in ("shortest patch first", "fewest files first", RANDOM):
        assert name in out


def test_it_rejects_an_unknown_batch_or_grader_and_a_batch_without_references(reference_batch, tmp_path):
    with pytest.raises(CommandError, match="no batch named 'nope'"):
        evaluate_grader(batch="nope")
    with pytest.raises(CommandError, match="no profile named 'nope'"):
        evaluate_grader(batch="refs", grader="nope")
    batch_import(paths=[write_jsonl(tmp_path / "plain.jsonl", group("p", [1.0, 0.0]))], batch_name="plain")
    with pytest.raises(CommandError, match="no group has a reference_patch"):
        evaluate_grader(batch="plain")
