"""The grader SFT export: groups whose ranking a human made or confirmed, as chat examples
for TRL's SFTTrainer and preference pairs for its DPOTrainer, split by task.

`write_sft` writes into an export's folder (docs/grader-sft.md says what each holds):

- `train.jsonl`, `validation.jsonl`: one example per group, `messages` = the grader's
  system prompt, the workspace as its first turn shows it, and the verified ranking as
  the `submit_ranking` answer (grading/sft.py builds and checks them);
- `pairs_train.jsonl`, `pairs_validation.jsonl`: `prompt`, `chosen`, `rejected`;
- `datasheet.md`: counts, sources, flags, exclusions, agreement, options;

and returns the same facts as a JSON-able summary for the manifest. Same data and
options, same bytes: groups go in (task, group id) order, keys are sorted, nothing
depends on the clock.

Which rankings count as verified, from the group's final chain (webapp/rankings.py):
its latest row holds tiers -> the human's ranking, "human_confirmed" when it orders
the passing trajectories as the group's latest grading does, else "human_made"; its
latest row hands the group back to the grader (a revert to version 0, tiers null) ->
the grader's ranking, "human_confirmed", provided that grading finished before the
revert (a later one no human has seen).
"""

from __future__ import annotations

import io
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations
from pathlib import Path

from django.db.models import Exists, OuterRef

from grading.agreement import summarise
from grading.cases import GroupCase
from grading.rankings import FLAGS, InvalidRanking
from grading.sft import (
    TRAIN,
    VALIDATION,
    NearDuplicates,
    answer,
    grader_text,
    patch_fingerprint,
    same_ranking,
    split_of,
    swapped,
    under_test_verdicts,
    workspace_for,
)
from grading.workspace import PROMPT_VERSION
from webapp.cases import group_cases
from webapp.exports.sft_datasheet import datasheet
from webapp.models import Annotation, Batch, Grading, Group
from webapp.rankings import CHUNK as QUERY_CHUNK
from webapp.rankings import FinalRanking, Viewer, chain_heads, decide, grader_rankings

OPTIONS = {"seed": 0, "validation_share": 0.1, "near_duplicate_threshold": 1.0}
SIDES = (TRAIN, VALIDATION)
EXAMPLES = {TRAIN: "train.jsonl", VALIDATION: "validation.jsonl"}
PAIRS = {TRAIN: "pairs_train.jsonl", VALIDATION: "pairs_validation.jsonl"}
DATASHEET = "datasheet.md"
MADE, CONFIRMED = "human_made", "human_confirmed"
GROUPS_AT_ONCE = 200  # groups whose trajectories are in memory at once
PROBE_CHUNK = 10  # groups the launch's check loads at once: the first one usually exports

FEW_PASSING = "fewer than two passing trajectories: the grader is never asked"
NO_GRADING = "handed back to the grader, which has no ranking"
REGRADED = "graded again after a human handed it back to the grader"
NOT_ACCEPTED = "ranked independently, no ranking accepted into the final chain"


def parse_sft_options(data: Mapping) -> dict:
    """The export's options with defaults filled in. Numbers may come as text (forms and
    command lines give text). ValueError("field: reason") for an unknown key or a bad value."""
    unknown = sorted(set(data) - set(OPTIONS), key=str)
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown option; the options are {', '.join(OPTIONS)}")
    given = {**OPTIONS, **data}
    seed = _number(given["seed"], "seed", int)
    if not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed: must be from 0 to {2 ** 32 - 1}, not {seed}")
    share = _number(given["validation_share"], "validation_share", float)
    if not 0 < share < 1:
        raise ValueError(f"validation_share: must lie strictly between 0 and 1, not {share}")
    threshold = _number(given["near_duplicate_threshold"], "near_duplicate_threshold", float)
    if not 0 < threshold <= 1:
        raise ValueError(f"near_duplicate_threshold: must be above 0 and at most 1, not {threshold}")
    return {"seed": seed, "validation_share": share, "near_duplicate_threshold": threshold}


def _number(value, name: str, kind: type) -> int | float:
    what = "a whole number" if kind is int else "a number"
    if isinstance(value, str):
        try:
            return kind(value.strip())
        except ValueError:
            raise ValueError(f"{name}: must be {what}, not {value[:40]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int if kind is int else int | float):
        raise ValueError(f"{name}: must be {what}, not {str(value)[:40]!r}")
    return kind(value)


@dataclass(frozen=True)
class _Verified:
    """A group's verified ranking, where it came from, and the grader's latest ranking."""

    group_pk: int
    group_id: str
    task_key: str  # the task id, or the group id where the import gave none
    ranking: FinalRanking
    source: str
    grader: FinalRanking | None


@dataclass
class _Tally:
    excluded: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    duplicates: dict[str, str] = field(default_factory=dict)
    source: Counter = field(default_factory=Counter)
    flags: Counter = field(default_factory=Counter)
    pairs: Counter = field(default_factory=Counter)
    rewritten: int = 0
    corrected: list[str] = field(default_factory=list)  # group ids whose human overrode test verdicts
    tasks: dict[str, set] = field(default_factory=lambda: {side: set() for side in SIDES})
    examples: Counter = field(default_factory=Counter)
    side_pairs: Counter = field(default_factory=Counter)
    exported: list[int] = field(default_factory=list)  # group pks
    with_grader: list[tuple] = field(default_factory=list)  # (verified tiers, grader tiers)


def write_sft(batch: Batch, folder: Path, *, viewer: Viewer, options: dict,
              on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the SFT files of `batch` into `folder` (which exists and is empty); return the
    summary. ValueError when the batch has no group a human ranked, or none of those can
    be exported (the message says why); RankingsHidden unless `viewer` may see every ranking."""
    options = parse_sft_options(options)
    reviewed = _reviewed(batch, viewer)
    tally = _Tally()
    files = {name: (folder / name).open("w", encoding="utf-8", newline="\n")
             for name in [*EXAMPLES.values(), *PAIRS.values()]}
    try:
        _export_all(batch, reviewed, options, tally, files, viewer=viewer, chunk=GROUPS_AT_ONCE,
                    on_progress=on_progress)
    finally:
        for handle in files.values():
            handle.close()
    _refuse_if_none(batch, reviewed, tally)
    _not_accepted(batch, tally)
    summary = _summary(batch, options, tally, reviewed=len(reviewed))
    (folder / DATASHEET).write_text(datasheet(summary), encoding="utf-8", newline="\n")
    return summary


def check_sft(batch: Batch, *, viewer: Viewer, options: dict) -> None:
    """Raise write_sft's ValueError when it would have nothing to write, else return: the
    launch's check, so that the page refuses at once what a worker would only fail on.
    It stops at the first group that exports, writing nothing."""
    options = parse_sft_options(options)
    reviewed = _reviewed(batch, viewer)
    tally = _Tally()
    files = {name: io.StringIO() for name in [*EXAMPLES.values(), *PAIRS.values()]}
    _export_all(batch, reviewed, options, tally, files, viewer=viewer, chunk=PROBE_CHUNK,
                until=lambda: bool(tally.exported))
    _refuse_if_none(batch, reviewed, tally)


def _reviewed(batch: Batch, viewer: Viewer) -> list[tuple[int, str, str]]:
    """(pk, group id, task id) of the groups with a row in their final chain; ValueError if none."""
    viewer.require_whole(batch)
    final_chain = Annotation.objects.filter(group=OuterRef("pk"), independent=False)
    reviewed = list(Group.objects.filter(Exists(final_chain), batch=batch).values_list("pk", "group_id", "task_id"))
    if not reviewed:
        raise ValueError(f"batch {batch.name!r} has no group whose ranking a human made or confirmed: rank "
                         "groups on their group page or through the annotation queue, then export again")
    return reviewed


def _export_all(batch: Batch, reviewed: list, options: dict, tally: _Tally, files: dict, *, viewer: Viewer,
                chunk: int, on_progress=None, until: Callable[[], bool] = lambda: False) -> None:
    """Export the groups of `reviewed` in order, `chunk` at a time, until `until()` holds."""
    verified = _verified(reviewed, tally, viewer)
    total, done = len(reviewed), len(reviewed) - len(verified)
    if on_progress:
        on_progress(done, total)
    deduplicate = NearDuplicates(options["near_duplicate_threshold"])
    for start in range(0, len(verified), chunk):
        part = verified[start:start + chunk]
        views = group_cases([item.group_pk for item in part])
        for item in part:
            _export(batch, item, views[item.group_pk], options, deduplicate, tally, files)
        done += len(part)
        if on_progress:
            on_progress(done, total)
        if until():
            return


def _refuse_if_none(batch: Batch, reviewed: list, tally: _Tally) -> None:
    if not tally.exported:
        reasons = "; ".join(f"{reason}: {len(ids)}" for reason, ids in sorted(tally.excluded.items()))
        raise ValueError(f"batch {batch.name!r}: none of the {len(reviewed)} groups a human ranked can be "
                         f"exported ({reasons})")


def _verified(reviewed: list[tuple[int, str, str]], tally: _Tally, viewer: Viewer) -> list[_Verified]:
    """The verified ranking of each (pk, group id, task id) whose final chain has a row, in
    (task, group id) order; the others are tallied as excluded."""
    pks = [pk for pk, _, _ in reviewed]
    graders = grader_rankings(pks, viewer=viewer)
    heads = {head.group_id: head for head in chain_heads(pks, viewer=viewer)}
    grading_pks = [g.grading_id for g in graders.values()]
    finished = {}
    for start in range(0, len(grading_pks), QUERY_CHUNK):
        finished.update(Grading.objects.filter(pk__in=grading_pks[start:start + QUERY_CHUNK])
                        .values_list("pk", "finished_at"))
    out = []
    for pk, group_id, task_id in reviewed:
        grader, head = graders.get(pk), heads[pk]
        final = decide(grader, head)
        if final is None:
            tally.excluded[NO_GRADING].append(group_id)
            continue
        if final.source == "human":
            source = CONFIRMED if grader is not None and same_ranking(final.tiers, grader.tiers) else MADE
        elif finished[final.grading_id] > head.created_at:
            tally.excluded[REGRADED].append(group_id)
            continue
        else:
            source = CONFIRMED
        out.append(_Verified(pk, group_id, task_id or group_id, final, source, grader))
    return sorted(out, key=lambda v: (v.task_key, v.group_id))


def _export(batch: Batch, item: _Verified, view: GroupCase, options: dict, deduplicate: NearDuplicates,
            tally: _Tally, files: dict) -> None:
    """One group: its example and pairs written, or the reason it was left out tallied."""
    gid, ranking = item.group_id, item.ranking
    if len(view.passing) < 2:
        tally.excluded[FEW_PASSING].append(gid)
        return
    if ranking.verdicts:
        tiers, rationales = under_test_verdicts(ranking.tiers, ranking.rationales, ranking.verdicts,
                                                [t.trajectory_id for t in view.passing])
        ranking = replace(ranking, tiers=tiers, rationales=rationales)
    workspace = workspace_for(view, options["seed"])
    try:
        chosen = answer(workspace, ranking.tiers, ranking.rationales, ranking.flags)
    except InvalidRanking as error:
        tally.excluded[str(error)].append(gid)
        return
    fingerprints = frozenset(patch_fingerprint(t.patch) for t in view.passing)
    twin = deduplicate.twin(gid, item.task_key, fingerprints)
    if twin is not None:
        tally.duplicates[gid] = twin
        return
    side = split_of(item.task_key, seed=options["seed"], validation_share=options["validation_share"])
    prompt = workspace.initial_messages()
    meta = {"batch": batch.name, "group_id": gid, "task_id": item.task_key}
    _line(files[EXAMPLES[side]], {**meta, "ranking_source": item.source, "messages": [*prompt, chosen]})
    for rejected_from, rejected in _rejected(workspace, ranking, item.grader, tally):
        _line(files[PAIRS[side]], {**meta, "rejected_from": rejected_from, "prompt": prompt,
                                   "chosen": [chosen], "rejected": [rejected]})
        tally.pairs[rejected_from] += 1
        tally.side_pairs[side] += 1
    tally.exported.append(item.group_pk)
    if ranking.verdicts:
        tally.corrected.append(gid)
    if item.grader is not None:
        tally.with_grader.append((ranking.tiers, item.grader.tiers))
    tally.source[item.source] += 1
    tally.examples[side] += 1
    tally.tasks[side].add(item.task_key)
    tally.flags.update(name for names in ranking.flags.values() for name in names)
    tally.rewritten += sum(1 for text in ranking.rationales.values() if text and grader_text(text) != text)


def _rejected(workspace, ranking: FinalRanking, grader: FinalRanking | None, tally: _Tally):
    """(where from, assistant message) of each worse answer: the grader's ranking where the
    human ordered differently, and the verified ranking with its best and worst swapped."""
    if grader is not None and not same_ranking(grader.tiers, ranking.tiers):
        try:
            yield "grader", answer(workspace, grader.tiers, grader.rationales, grader.flags)
        except InvalidRanking:
            tally.pairs["grader_answer_unusable"] += 1
    worse = swapped(ranking.tiers)
    if worse is not None and (grader is None or not same_ranking(worse, grader.tiers)):
        yield "swap", answer(workspace, worse, ranking.rationales, ranking.flags)


def _line(handle, record: dict) -> None:
    handle.write(json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":")) + "\n")


def _not_accepted(batch: Batch, tally: _Tally) -> None:
    """Groups that annotators ranked in chains of their own, with none accepted yet."""
    chain = Annotation.objects.filter(group=OuterRef("pk"))
    ids = (Group.objects.filter(Exists(chain.filter(independent=True)), batch=batch)
           .exclude(Exists(chain.filter(independent=False))).values_list("group_id", flat=True))
    tally.excluded[NOT_ACCEPTED].extend(ids)


def _summary(batch: Batch, options: dict, tally: _Tally, *, reviewed: int) -> dict:
    excluded = {reason: sorted(ids) for reason, ids in sorted(tally.excluded.items()) if ids}
    return {
        "batch": batch.name,
        "options": options,
        "prompt_version": PROMPT_VERSION,
        "groups": {"in_batch": Group.objects.filter(batch=batch).count(), "ranked_by_a_human": reviewed,
                   "exported": len(tally.exported), "excluded": excluded,
                   "near_duplicates": dict(sorted(tally.duplicates.items()))},
        "source": {MADE: tally.source[MADE], CONFIRMED: tally.source[CONFIRMED]},
        "split": {side: {"tasks": len(tally.tasks[side]), "examples": tally.examples[side],
                         "pairs": tally.side_pairs[side]} for side in SIDES},
        "pairs": {key: tally.pairs[key] for key in ("grader", "swap", "grader_answer_unusable")},
        "flags": {name: tally.flags[name] for name in FLAGS if tally.flags[name]},
        "rationales_rewritten": tally.rewritten,
        "test_verdicts_corrected": sorted(tally.corrected),
        "agreement": {"annotators": _annotator_agreement(tally.exported),
                      "grader": {"groups": len(tally.with_grader), **_estimates(tally.with_grader)}},
        "files": [*EXAMPLES.values(), *PAIRS.values(), DATASHEET],
    }


def _annotator_agreement(pks: list[int]) -> dict:
    """Agreement between annotators who ranked a group independently (k-way overlap): every
    two annotators' latest rankings of a group, the one who ranked first as the reference."""
    latest: dict[int, dict[int, tuple[int, list]]] = defaultdict(dict)
    for start in range(0, len(pks), QUERY_CHUNK):
        rows = (Annotation.objects.filter(group_id__in=pks[start:start + QUERY_CHUNK], independent=True,
                                          tiers__isnull=False)
                .order_by("group_id", "version").values_list("group_id", "user_id", "version", "tiers"))
        for group_pk, user_pk, version, tiers in rows:
            first = latest[group_pk].get(user_pk, (version, None))[0]
            latest[group_pk][user_pk] = (first, tiers)
    pairs = []
    for by_user in latest.values():
        rankings = [tiers for _, tiers in sorted(by_user.values(), key=lambda v: v[0])]
        pairs += list(combinations(rankings, 2))
    groups = sum(1 for by_user in latest.values() if len(by_user) > 1)
    return {"groups": groups, "pairs": len(pairs), **_estimates(pairs)}


def _estimates(pairs) -> dict:
    return {name: {"value": e["value"], "interval": list(e["interval"]) if e["interval"] else None, "n": e["n"]}
            for name, e in asdict(summarise(pairs)).items()}
