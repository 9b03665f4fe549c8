"""How well the heuristic grader ranks passing patches, against a proxy: similarity to the
reference fix (grading/evaluation.py), beside trivial baselines measured in the same run.

    .venv/bin/python -m bench.grader_quality [FILE.jsonl]   (default ../shared/data/public.jsonl)

Prints the table, the same again on two halves of the groups split by task id (nothing is
tuned on either), the ratio of the grader's mean tau-b and top-1 to the best baseline's, and
two ceilings: rankings that read the reference fix (no grader can) and know its files and
its size, to show how much of the proxy any ranking by patch shape can reach.
"""

import sys
from pathlib import Path

from grading.evaluation import (
    ReferenceGroup,
    changed_lines,
    evaluate,
    format_table,
    reference_groups,
    tiers_by,
    touched_paths,
)
from grading.graders.heuristic import HeuristicGrader
from grading.rollouts import load_rollouts

DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "public.jsonl"


def main(path: Path) -> None:
    if not path.exists():
        print(f"{path}: not found; nothing to measure")
        return
    groups = reference_groups(load_rollouts([path]))
    grader = HeuristicGrader()
    graders = {f"heuristic ({grader.version})": lambda view: grader.rank(view).tiers}
    evaluation = evaluate(groups, graders)
    print(f"{path}\n{format_table(evaluation)}\n")
    ordered = sorted(groups, key=lambda g: g.view.group_id)
    middle = len(ordered) // 2
    for name, half in (("first half by task id", ordered[:middle]), ("second half", ordered[middle:])):
        print(f"{name}:\n{format_table(evaluate(half, graders))}\n")
    ours, *baselines = evaluation.results
    for measure in ("tau", "top1"):
        best = max(baselines, key=lambda r: getattr(r, measure).value)
        print(f"{measure}: heuristic / best baseline ({best.name}) = "
              f"{getattr(ours, measure).value:+.2f} / {getattr(best, measure).value:+.2f} = "
              f"{getattr(ours, measure).value / getattr(best, measure).value:.2f}")


    print(f"\nceilings, reading the reference fix (not graders):\n{format_table(evaluate(groups, ceilings(groups)))}")


def ceilings(groups: list[ReferenceGroup]) -> dict:
    """Rankers that know the reference's touched files (Jaccard, best first) and then
    prefer the fewest changed lines, or the line count nearest the reference's."""
    references = {g.view.group_id: g.reference_patch for g in groups}

    def by_files_then(size):
        def rank(view):
            reference = references[view.group_id]
            files, lines = touched_paths(reference), len(changed_lines(reference))
            keys = {t.trajectory_id: (-len(touched_paths(t.patch) & files) / len(touched_paths(t.patch) | files),
                                      size(len(changed_lines(t.patch)), lines)) for t in view.passing}
            order = {key: i for i, key in enumerate(sorted(set(keys.values())))}
            return tiers_by({tid: order[key] for tid, key in keys.items()}, higher_first=False)
        return rank

    return {"ceiling: reference files, then fewest lines": by_files_then(lambda n, _: n),
            "ceiling: reference files, then lines nearest": by_files_then(lambda n, ref: abs(n - ref))}


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
