"""The datasheet beside a grader SFT export: its summary as Markdown a person reads.

Group ids are untrusted text: they appear only as JSON strings inside fenced blocks, where
nothing they hold can end the block or become markup.
"""

from __future__ import annotations

import json

DOCS = "docs/grader-sft.md"


def datasheet(summary: dict) -> str:
    groups, split, pairs = summary["groups"], summary["split"], summary["pairs"]
    lines = [
        "# Grader SFT export: datasheet",
        "",
        f"Batch {json.dumps(summary['batch'])}, grader prompt version {summary['prompt_version']}. "
        f"Options: `{json.dumps(summary['options'], sort_keys=True)}`. Definitions: {DOCS}.",
        "",
        "## Groups",
        "",
        "| | groups |",
        "| --- | ---: |",
        f"| in the batch | {groups['in_batch']} |",
        f"| with a ranking in the final chain (a human ranked, accepted or reverted) | {groups['ranked_by_a_human']} |",
        f"| exported | {groups['exported']} |",
        f"| of which the human made the ranking (`human_made`) | {summary['source']['human_made']} |",
        f"| of which a human confirmed the grader's ranking (`human_confirmed`) | "
        f"{summary['source']['human_confirmed']} |",
        f"| removed as near duplicates | {len(groups['near_duplicates'])} |",
        *(f"| excluded: {reason} | {len(ids)} |" for reason, ids in groups["excluded"].items()),
        "",
        "## Split by task",
        "",
        "| side | tasks | examples | pairs |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {side} | {row['tasks']} | {row['examples']} | {row['pairs']} |" for side, row in split.items()),
        "",
        "## Preference pairs",
        "",
        f"- rejected = the grader's ranking, where the human ordered differently: {pairs['grader']}",
        f"- rejected = the verified ranking with its best and worst trajectories swapped: {pairs['swap']}",
        f"- grader rankings that are no valid answer (a rationale missing, say), so no pair: "
        f"{pairs['grader_answer_unusable']}",
        "",
        "## Flags in the exported rankings",
        "",
        *([f"- {name}: {count}" for name, count in summary["flags"].items()] or ["- none"]),
        "",
        f"Rationales rewritten into the grader's alphabet or length: {summary['rationales_rewritten']}.",
        "",
        f"Rankings made under test verdicts a human corrected: {len(summary['test_verdicts_corrected'])}. The "
        "grader ranks what the tests passed, so each example ranks those: a trajectory the human passed against "
        "the tests is left out, one the human failed is ranked last with the human's reason.",
        "",
        "## Agreement",
        "",
        _agreement("Annotators who ranked the same group independently", summary["agreement"]["annotators"]),
        _agreement("The grader's latest ranking against the exported one", summary["agreement"]["grader"]),
    ]
    if groups["near_duplicates"]:
        twins = groups["near_duplicates"].items()
        lines += ["", "## Near duplicates removed (removed: kept)", "", "```",
                  *(f"{json.dumps(removed)}: {json.dumps(kept)}" for removed, kept in twins), "```"]
    for reason, ids in groups["excluded"].items():
        lines += ["", f"## Excluded: {reason}", "", "```", *(json.dumps(gid) for gid in ids), "```"]
    return "\n".join(lines) + "\n"


def _agreement(title: str, agreement: dict) -> str:
    measures = []
    for name in ("kendall_tau", "pairwise_accuracy", "top1"):
        estimate = agreement[name]
        if estimate["value"] is None:
            measures.append(f"{name}: undefined")
            continue
        interval = estimate["interval"]
        measures.append(f"{name} {estimate['value']:.3f} (95% bootstrap {interval[0]:.3f}..{interval[1]:.3f}, "
                        f"n={estimate['n']})")
    return f"- {title}: {agreement['groups']} groups; " + "; ".join(measures) + "."
