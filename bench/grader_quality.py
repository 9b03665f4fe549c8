"""How well the heuristic grader ranks passing patches, against a proxy: similarity to the
reference fix (grading/evaluation.py), beside trivial baselines measured in the same run.

    .venv/bin/python -m bench.grader_quality FILE.jsonl   (rollout groups with reference fixes)

Prints the table, the same again on two halves of the groups split by task id (nothing is
tuned on either), the ratio of the grader's mean tau-b and top-1 to the best baseline's, and
two ceilings: rankings that read the reference fix (no grader can) and know its files and
its size, to show how much of the proxy any ranking by patch shape can reach. Last, a tuned
bound: the best weighted sum of seven patch and statement features, its weights chosen on
the very groups it is measured on, so no weighting of those features does better here.
"""

import itertools
import math
import re
import sys
from pathlib import Path

import numpy as np

from grading.agreement import kendall_tau, top1_share
from grading.diffs import parse_patch
from grading.evaluation import (
    ReferenceGroup,
    changed_lines,
    evaluate,
    format_table,
    proxy_tiers,
    reference_groups,
    tiers_by,
    touched_paths,
    usable,
)
from grading.graders.heuristic import HeuristicGrader
from grading.rollouts import load_rollouts


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
    print(f"\n{tuned_bound(groups)}")


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


# --- the tuned bound ---------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
# Weights tried per feature (a score: higher ranks first). Sizes are log2, so -1 is
# "a patch twice as long loses one point".
BOUND_GRID = {
    "log2 changed lines": (-1.0,),
    "files": (0.0, -0.5, -1.0, -2.0, -4.0),
    "test files": (0.0, -1.0, -2.0),
    "share of lines other distinct passing changes write": (0.0, 0.5, 1.0, 2.0),
    "log2 removed lines": (0.0, 0.25, 0.5, 1.0),
    "share of identifiers named in the statement": (0.0, 1.0),
    "share of lines quoted in the statement": (0.0, 1.0),
}


def bound_features(view) -> dict[str, dict[str, float]]:
    """Per passing trajectory, the BOUND_GRID features, centred on the group's mean."""
    statement = view.statement or ""
    named = set(_IDENTIFIER.findall(statement))
    quoted = re.sub(r"\s+", "", statement)

    def lines(patch):  # sign kept, whitespace removed
        return {line[0] + re.sub(r"\s+", "", line[1:]) for line in changed_lines(patch) if len(line) > 1}

    changes = {t.trajectory_id: lines(t.patch) for t in view.passing}
    distinct = {frozenset(c) for c in changes.values() if c}
    rows = {}
    for t in view.passing:
        mine = changes[t.trajectory_id]
        others = [c for c in distinct if c != mine]
        identifiers = set(_IDENTIFIER.findall(" ".join(line[1:] for line in mine)))
        rows[t.trajectory_id] = {
            "log2 changed lines": math.log2(len(changed_lines(t.patch)) + 1),
            "files": len(touched_paths(t.patch)),
            "test files": sum(f.is_test for f in parse_patch(t.patch).files),
            "share of lines other distinct passing changes write":
                float(np.mean([np.mean([line in c for c in others]) for line in mine])) if others and mine else 0.0,
            "log2 removed lines": math.log2(sum(line[0] == "-" for line in mine) + 1),
            "share of identifiers named in the statement": len(identifiers & named) / (len(identifiers) + 1),
            "share of lines quoted in the statement":
                sum(len(line) > 6 and line[1:] in quoted for line in mine) / (len(mine) + 1),
        }
    for name in BOUND_GRID:
        mean = float(np.mean([row[name] for row in rows.values()]))
        for row in rows.values():
            row[name] -= mean
    return rows


def tuned_bound(groups: list[ReferenceGroup]) -> str:
    """The best weighting in BOUND_GRID by tau + top-1, and the best top-1 any weighting
    reaches, both chosen on `groups` themselves: an upper bound for these features."""
    used = [(proxy_tiers(g), bound_features(g.view)) for g in groups]
    used = [(proxy, rows) for proxy, rows in used if usable(proxy)]
    results = []
    for weights in itertools.product(*BOUND_GRID.values()):
        taus, hits = [], []
        for proxy, rows in used:
            scores = {tid: round(sum(w * row[name] for w, name in zip(weights, BOUND_GRID, strict=True)), 9)
                      for tid, row in rows.items()}
            ranking = tiers_by(scores, higher_first=True)
            tau = kendall_tau(proxy, ranking)
            if tau is not None:
                taus.append(tau)
            hits.append(top1_share(reference=proxy, predicted=ranking))
        results.append((float(np.mean(taus)), float(np.mean(hits)), dict(zip(BOUND_GRID, weights, strict=True))))
    tau, top1, weights = max(results, key=lambda r: r[0] + r[1])
    named = ", ".join(f"{name} {w:+g}" for name, w in weights.items() if w)
    return (f"tuned bound, weights chosen on these {len(used)} groups out of {len(results)} weightings "
            f"(not a grader):\n  best tau + top-1: tau {tau:+.2f}, top-1 {top1:.2f} ({named})\n"
            f"  highest tau of any: {max(r[0] for r in results):+.2f}; "
            f"highest top-1 of any: {max(r[1] for r in results):.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bench.grader_quality FILE.jsonl (rollout groups with reference fixes)")
    main(Path(sys.argv[1]))
