"""Advantages of a batch: GRPO, then GAGAR redistribution over final rankings.

One row per trajectory, in a stable order (group, then trajectory id), so
the same inputs and config always give the same table. A group's ranking is
its final ranking (`webapp.rankings`); a group without one keeps its GRPO
advantages (source "none"), and so does a group whose ranking cannot apply
(source "fallback", with the reason). A batch keeps its redistribution
config; every way in (the config form, the `advantages` command, exports,
the API) reads one through `parse_advantage_config`. Large batches are read
a chunk of whole groups at a time (`advantage_chunks`); many small ones, a
run's steps, a window of batches at a time (`advantage_chunks_of_batches`).
"""

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
from django.conf import settings
from django.db import connection
from django.db.models import F, QuerySet
from django.db.models.functions import Collate

from grading.advantages import gagar_advantages
from grading.rankings import FLAGS
from grading.schedules import SCHEDULES, cap, describe_schedule
from webapp import work
from webapp.models import Batch, Group, Trajectory
from webapp.rankings import FinalRanking, Viewer, corrected_reward, final_rankings, pk_array

ROW_FIELDS = (
    "group_id", "trajectory_id", "reward", "corrected_reward", "passed", "label", "grpo_advantage", "factor",
    "rank", "advantage", "source", "source_reason", "flags", "grader", "grader_version", "ranking_version",
)
# `reward` is the tests' reward; `corrected_reward` the reward of a trajectory whose verdict the
# group's human ranking overrode (else None), and `passed` the verdict after that correction:
# GRPO and the redistribution run on the corrected rewards and verdicts.
# Where a group's advantages come from: its ranking, a human's or the grader's (source "human",
# "grader"; reason "redistributed"); no ranking ("none", "no_ranking"); or a ranking that left
# the GRPO advantages as they were ("fallback"), because it does not rank exactly the passing
# trajectories (RANKING_MISMATCH), lacks a score the scores schedule needs (MISSING_SCORES), or
# for one of grading.advantages' reasons (single_pass, nonpositive_sum, equal_factors).
SOURCES = ("human", "grader", "fallback", "none")
RANKING_MISMATCH, MISSING_SCORES = "ranking_mismatch", "missing_scores"
# Flags that cap a trajectory's factor at w_flag when the batch sets one. A new batch caps
# them at DEFAULT_W_FLAG = 0: a trajectory flagged as a reward hack or as editing the tests
# keeps its rank but gets no share of its group's positive advantage (docs/annotation.md).
DEFAULT_FLAG_NAMES = ("reward_hacking", "edits_tests")
DEFAULT_W_FLAG = 0.0


@dataclass(frozen=True)
class AdvantageConfig:
    """A batch's redistribution config. Its defaults are the only ones: every way in (the
    config form, the `advantages` command, exports, the API, a stored config) reads one
    through `parse_advantage_config`, which takes what it leaves out from here."""

    schedule: str
    params: Mapping[str, Any] = field(default_factory=dict)  # the schedule's, read-only
    norm_by_std: bool = True
    unbiased_std: bool = True
    w_flag: float | None = DEFAULT_W_FLAG  # None: flags cap nothing
    flag_names: tuple[str, ...] = DEFAULT_FLAG_NAMES

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def as_dict(self) -> dict:
        return {
            "schedule": self.schedule, "params": dict(self.params), "norm_by_std": self.norm_by_std,
            "unbiased_std": self.unbiased_std, "w_flag": self.w_flag, "flag_names": list(self.flag_names),
        }


def parse_advantage_config(data: Mapping, *, base: AdvantageConfig | None = None) -> AdvantageConfig:
    """A validated config from `data`, which holds any of AdvantageConfig's fields; ValueError
    names the field and the reason.

    With `base` (a config being overridden) what `data` leaves out comes from `base`, and
    `params` update base's while the schedule stays; without, `schedule` is required and the
    rest takes the defaults. Parameters given neither way take the schedule's defaults.
    `factors` may be text, "1, 0.6, 0.3", as a form or a command line gives it.
    """
    unknown = sorted(set(data) - {f.name for f in fields(AdvantageConfig)})
    if unknown:
        raise ValueError(f"unknown config fields {unknown}")
    if base is None:
        if "schedule" not in data:
            raise ValueError("schedule: required")
        base = AdvantageConfig(schedule=data["schedule"])
    schedule = data.get("schedule", base.schedule)
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r} (known schedules: {', '.join(sorted(SCHEDULES))})")
    params = dict(data.get("params", {}))
    if isinstance(params.get("factors"), str):
        try:
            params["factors"] = [float(x) for x in params["factors"].split(",") if x.strip()]
        except ValueError:
            raise ValueError("factors must be numbers separated by commas") from None
    if schedule == base.schedule:
        params = {**base.params, **params}
    params = describe_schedule(schedule, params)["params"]
    w_flag = data.get("w_flag", base.w_flag)
    if w_flag is not None:
        w_flag = cap("w_flag", w_flag)
    flag_names = data.get("flag_names", base.flag_names)
    unknown = sorted(set(flag_names) - set(FLAGS))
    if unknown:
        raise ValueError(f"unknown flags {unknown}; flags are {list(FLAGS)}")
    return AdvantageConfig(schedule=schedule, params=params,
                           norm_by_std=bool(data.get("norm_by_std", base.norm_by_std)),
                           unbiased_std=bool(data.get("unbiased_std", base.unbiased_std)), w_flag=w_flag,
                           flag_names=tuple(f for f in FLAGS if f in set(flag_names)))


# A new batch's config; a batch keeps the one it was made with (models.default_advantage_config).
DEFAULT_CONFIG = parse_advantage_config({"schedule": "linear", "params": {"w_min": 0.2}})


def advantage_config_update(*, batch: Batch, **given) -> AdvantageConfig:
    """Validate a redistribution config (`given`: AdvantageConfig's fields; what is left out
    takes the defaults) and keep it with `batch`; ValueError says what is wrong."""
    config = parse_advantage_config(given)
    batch.advantage_config = config.as_dict()
    batch.save(update_fields=["advantage_config"])
    work.run_figures_stale(batch.pk)  # its advantages, so its step's figures and grading panel
    return config


def advantage_rows(batch: Batch, *, viewer: Viewer, config: AdvantageConfig | None = None) -> list[dict]:
    """Rows of ROW_FIELDS for every trajectory of `batch`; RankingsHidden unless `viewer` may
    see every group's ranking (`advantage_chunks`)."""
    return [row for chunk in advantage_chunks(batch, viewer=viewer, config=config) for row in chunk.rows()]


def ranking_advantage_rows(group: Group, ranking: FinalRanking | None, trajectories=None) -> list[dict]:
    """Rows of ROW_FIELDS for one group as if `ranking` were its final ranking (None: no
    ranking): what the group page shows once it has decided, and the editor's live preview.
    `trajectories` (Trajectory objects of the group) saves the page a query."""
    config = parse_advantage_config(group.batch.advantage_config)
    if trajectories is None:
        rows, _ = trajectory_columns([group.pk])
    else:
        rows = TrajectoryColumns.of(sorted(((group.pk, t.trajectory_id, t.reward, t.passed) for t in trajectories),
                                           key=lambda t: t[1]))
    return _chunk(rows, {group.pk: group.group_id}, config, {group.pk: ranking} if ranking is not None else {}).rows()


@dataclass(frozen=True, eq=False)
class AdvantageChunk:
    """The advantages of whole groups, column by column: n trajectories of G groups, ordered
    by group id, then trajectory id.

    Per trajectory, shape (n,): `group_index` (intp, each one's group in 0..G-1, non-decreasing),
    `trajectory_ids`, `reward` (the tests'), `corrected_reward` (NaN: not overridden), `passed`
    (after the correction), `grpo_advantage`, `factor` (NaN: no factor), `rank`
    (0: not ranked), `advantage`; `flags` by position, for the few that have any. Per group,
    shape (G,): `group_ids`, `label`, `source`, `source_reason`, `grader`, `grader_version`,
    `ranking_version` (None where there is no such thing).
    """

    group_ids: list[str]
    group_index: np.ndarray
    trajectory_ids: list[str]
    reward: np.ndarray
    corrected_reward: np.ndarray
    passed: np.ndarray
    grpo_advantage: np.ndarray
    factor: np.ndarray
    rank: np.ndarray
    advantage: np.ndarray
    flags: dict[int, tuple[str, ...]]
    label: list[str]
    source: list[str]
    source_reason: list[str]
    grader: list[str | None]
    grader_version: list[str | None]
    ranking_version: list[str | None]

    def __len__(self) -> int:
        return len(self.trajectory_ids)

    @classmethod
    def concatenated(cls, chunks: Sequence["AdvantageChunk"]) -> "AdvantageChunk":
        """The rows of `chunks` one after the other, their groups numbered on."""
        if len(chunks) == 1:
            return chunks[0]
        rows = np.cumsum([0, *(len(c) for c in chunks)]).tolist()
        groups = np.cumsum([0, *(len(c.group_ids) for c in chunks)]).tolist()

        def joined(name: str) -> list:
            return [value for c in chunks for value in getattr(c, name)]

        def stacked(name: str) -> np.ndarray:
            return np.concatenate([getattr(c, name) for c in chunks])

        return cls(
            group_ids=joined("group_ids"),
            group_index=np.concatenate([c.group_index + first for c, first in zip(chunks, groups, strict=False)]),
            trajectory_ids=joined("trajectory_ids"), reward=stacked("reward"),
            corrected_reward=stacked("corrected_reward"), passed=stacked("passed"),
            grpo_advantage=stacked("grpo_advantage"), factor=stacked("factor"), rank=stacked("rank"),
            advantage=stacked("advantage"),
            flags={i + first: f for c, first in zip(chunks, rows, strict=False) for i, f in c.flags.items()},
            label=joined("label"), source=joined("source"), source_reason=joined("source_reason"),
            grader=joined("grader"), grader_version=joined("grader_version"), ranking_version=joined("ranking_version"),
        )

    def rows(self) -> list[dict]:
        """One dict of ROW_FIELDS per trajectory."""
        per_group = list(zip(self.group_ids, self.label, self.source, self.source_reason, self.grader,
                             self.grader_version, self.ranking_version, strict=True))
        factors = [None if math.isnan(f) else f for f in self.factor.tolist()]
        corrections = [None if math.isnan(r) else r for r in self.corrected_reward.tolist()]
        out = []
        for i, (g, tid, reward, corrected, passed, grpo, factor, rank, advantage) in enumerate(zip(
                self.group_index.tolist(), self.trajectory_ids, self.reward.tolist(), corrections,
                self.passed.tolist(), self.grpo_advantage.tolist(), factors, self.rank.tolist(),
                self.advantage.tolist(), strict=True)):
            group_id, label, source, reason, grader, grader_version, ranking_version = per_group[g]
            out.append({
                "group_id": group_id, "trajectory_id": tid, "reward": reward, "corrected_reward": corrected,
                "passed": passed, "label": label, "grpo_advantage": grpo, "factor": factor, "rank": rank or None,
                "advantage": advantage,
                "source": source, "source_reason": reason, "flags": list(self.flags.get(i, ())),
                "grader": grader, "grader_version": grader_version, "ranking_version": ranking_version,
            })
        return out


def advantage_chunks(batch: Batch, *, viewer: Viewer, config: AdvantageConfig | None = None
                     ) -> Iterator[AdvantageChunk]:
    """The advantages of every trajectory of `batch`, GAGAR_EXPORT_CHUNK_GROUPS groups at a time, in
    code point order of (group id, trajectory id) whatever the database's collation. A group
    never straddles two chunks: its advantages depend on all its trajectories. Memory stays
    that of one chunk, however large the batch.

    Advantages carry every ranking's order and flags, so RankingsHidden (before any row) unless
    `viewer` may see the rankings of all of the batch's groups."""
    viewer.require_whole(batch)
    config = config or parse_advantage_config(batch.advantage_config)
    after = None
    while True:
        page = list(next_groups(batch, after, settings.GAGAR_EXPORT_CHUNK_GROUPS))
        if not page:
            return
        rows, _ = trajectory_columns([pk for pk, _ in page])
        yield _chunk(rows, dict(page), config, final_rankings(dict(page), viewer=viewer, lean=True))
        after = page[-1][1]


def advantage_chunks_of_batches(batches: Sequence[tuple[Batch, AdvantageConfig]], *, viewer: Viewer
                                ) -> Iterator[tuple[Batch, Iterable[AdvantageChunk]]]:
    """Each of `batches`, (batch, config) in order, with the chunks that `advantage_chunks(batch,
    viewer=viewer, config=config)` gives: the same rows, read with fewer queries. Consecutive
    batches of at most GAGAR_EXPORT_CHUNK_GROUPS groups in all (by `Batch.n_groups`) are read
    together, a query for their groups, one for their trajectories and `final_rankings`' for
    their rankings: a run's steps are batches of a thousand trajectories, and these queries
    per batch were most of their export. A batch of more groups is read alone, a chunk at a
    time. Memory stays that of one window; take a batch's chunks before asking for the next.

    RankingsHidden, before any row, unless `viewer` may see the rankings of every batch."""
    for batch, _ in batches:
        viewer.require_whole(batch)
    for window in _windows(batches, settings.GAGAR_EXPORT_CHUNK_GROUPS):
        if len(window) == 1 and window[0][0].n_groups > settings.GAGAR_EXPORT_CHUNK_GROUPS:
            batch, config = window[0]
            yield batch, advantage_chunks(batch, viewer=viewer, config=config)
        else:
            yield from _window_chunks(window, viewer)


def _windows(batches: Sequence[tuple[Batch, AdvantageConfig]], limit: int
             ) -> Iterator[list[tuple[Batch, AdvantageConfig]]]:
    """`batches` cut in runs of consecutive ones of at most `limit` groups in all; a batch of
    more groups makes a window of its own."""
    window: list[tuple[Batch, AdvantageConfig]] = []
    groups = 0
    for batch, config in batches:
        if window and groups + batch.n_groups > limit:
            yield window
            window, groups = [], 0
        window.append((batch, config))
        groups += batch.n_groups
    if window:
        yield window


def _window_chunks(window: list[tuple[Batch, AdvantageConfig]], viewer: Viewer
                   ) -> Iterator[tuple[Batch, list[AdvantageChunk]]]:
    """Each batch of `window` with its advantages as one chunk (none for a batch without
    groups), as `advantage_chunks` reads a batch that fits in a chunk; each computed when asked for."""
    # The batches as a list: as a subquery, PostgreSQL planned a scan of every group.
    groups = (Group.objects.filter(batch__in=[batch.pk for batch, _ in window])
              .alias(key=_binary("group_id")).order_by("batch_id", "key").values_list("batch_id", "pk", "group_id"))
    pages: dict[int, list[tuple[int, str]]] = {batch.pk: [] for batch, _ in window}
    for batch_pk, pk, group_id in groups:
        pages[batch_pk].append((pk, group_id))
    pks = [pk for page in pages.values() for pk, _ in page]
    rows, bounds = trajectory_columns(pks)
    rankings = final_rankings(pks, viewer=viewer, lean=True)
    first = 0  # the position in `pks` of the batch's first group
    for batch, config in window:
        page = pages.pop(batch.pk)
        last = first + len(page)
        chunk = rows.slice(bounds[first], bounds[last])
        yield batch, [_chunk(chunk, dict(page), config, rankings)] if page else []
        first = last


def next_groups(batch: Batch, after: str | None, n: int) -> QuerySet:
    """(pk, group id) of the first `n` groups of `batch` after group id `after` (None: from the
    first), in code point order of group id: one page of the keyset an export reads."""
    groups = Group.objects.filter(batch=batch).alias(key=_binary("group_id")).order_by("key")
    if after is not None:
        groups = groups.filter(key__gt=after)
    return groups.values_list("pk", "group_id")[:n]


def _binary(field: str):
    """`field` compared byte by byte: PostgreSQL's default collation may order text by
    language; SQLite's is already binary. UTF-8 bytes sort as Python sorts the strings.
    On PostgreSQL an index on (batch, group id COLLATE "C") serves the keyset of groups."""
    return Collate(field, "C") if connection.vendor == "postgresql" else F(field)


@dataclass(frozen=True)
class TrajectoryColumns:
    """Trajectories' (group pk, trajectory id, reward, passed) as columns, each group's together."""

    group_pk: np.ndarray  # int64
    trajectory_id: list[str]
    reward: np.ndarray  # float64
    passed: np.ndarray  # bool

    @classmethod
    def of(cls, rows: Sequence[tuple]) -> "TrajectoryColumns":
        """From (group pk, trajectory id, reward, passed) tuples."""
        group_pk, trajectory_id, reward, passed = zip(*rows, strict=True) if rows else ((),) * 4
        return cls(np.array(group_pk, dtype=np.int64), list(trajectory_id), np.array(reward, dtype=np.float64),
                   np.array(passed, dtype=bool))

    def __len__(self) -> int:
        return len(self.trajectory_id)

    def slice(self, start: int, end: int) -> "TrajectoryColumns":
        return TrajectoryColumns(self.group_pk[start:end], self.trajectory_id[start:end], self.reward[start:end],
                                 self.passed[start:end])


_CSV_COLUMNS = {"position": pa.int64(), "group_pk": pa.int64(), "trajectory_id": pa.string(), "reward": pa.float64(),
                "passed": pa.bool_()}


def trajectory_columns(pks: list[int]) -> tuple[TrajectoryColumns, list[int]]:
    """The trajectories of the groups `pks` in that order of groups, then by trajectory id
    compared as `_binary` does; and where each group's rows start, with the end last
    (len(pks) + 1 offsets: group i's rows are bounds[i]:bounds[i + 1]).

    The pks are one parameter, an array (PostgreSQL) or JSON (SQLite) whose positions order
    the groups. On PostgreSQL the rows come by COPY as CSV and pyarrow parses them into
    columns: an export reads every trajectory, and a Python tuple per row cost more than
    the query. The unique (group, trajectory id) index covers reward and passed, so the
    rows are read from the index alone (with the cast: trajectory_id's declared 512
    characters make a sort look large enough to plan a scan of the whole table instead)."""
    table = connection.ops.quote_name(Trajectory._meta.db_table)
    if connection.vendor == "postgresql":
        position, rows = _copied_columns(
            f"SELECT p.position, t.group_id, t.trajectory_id, t.reward, t.passed "
            f"FROM unnest(%s::bigint[]) WITH ORDINALITY AS p(pk, position) JOIN {table} t ON t.group_id = p.pk "
            f'ORDER BY p.position, CAST(t.trajectory_id AS TEXT) COLLATE "C"', [pk_array(pks)])
    else:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT p.key + 1, t.group_id, t.trajectory_id, t.reward, t.passed "
                           f"FROM json_each(%s) p JOIN {table} t ON t.group_id = p.value "
                           f"ORDER BY p.key, t.trajectory_id", [json.dumps(list(pks))])
            found = cursor.fetchall()
        position = np.array([row[0] for row in found], dtype=np.int64)
        rows = TrajectoryColumns.of([row[1:] for row in found])
    bounds = np.searchsorted(position, np.arange(1, len(pks) + 2), side="left").tolist()
    return rows, bounds


def _copied_columns(query: str, params: list) -> tuple[np.ndarray, TrajectoryColumns]:
    """The rows of `query` (columns as in _CSV_COLUMNS), copied out as CSV and parsed by
    pyarrow: their positions, and the rest as columns."""
    data = bytearray()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)",
                                                           params) as copy:
        for block in copy:
            data += block
    if not data:
        table = pa.table({name: pa.array([], kind) for name, kind in _CSV_COLUMNS.items()})
    else:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(column_names=list(_CSV_COLUMNS), use_threads=False),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(column_types=_CSV_COLUMNS, true_values=["t"], false_values=["f"],
                                                  strings_can_be_null=False, quoted_strings_can_be_null=False))
    return table["position"].to_numpy(), TrajectoryColumns(
        table["group_pk"].to_numpy(), table["trajectory_id"].to_pylist(), table["reward"].to_numpy(),
        table["passed"].to_numpy(zero_copy_only=False))


def _chunk(trajectories: TrajectoryColumns, group_ids: Mapping[int, str], config: AdvantageConfig,
           rankings: Mapping[int, FinalRanking]) -> AdvantageChunk:
    """`trajectories`: each group's together; `group_ids`: group id by pk; `rankings`: the
    ranking of each group that has one, by pk."""
    n = len(trajectories)
    group_pks = trajectories.group_pk
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = group_pks[1:] != group_pks[:-1]
    starts = np.flatnonzero(new_group)
    group_index = np.cumsum(new_group, dtype=np.intp) - 1
    bounds = np.append(starts, n).tolist()
    pks = group_pks[starts].tolist()
    trajectory_ids = trajectories.trajectory_id
    rewards = trajectories.reward
    passed = trajectories.passed.copy()  # corrected below
    corrected, corrected_passed = _corrections(rankings, pks, bounds, trajectory_ids)
    overridden = ~np.isnan(corrected)
    passed[overridden] = corrected_passed[overridden]
    # Positions and values gathered in lists and set at once: numpy's per-item writes cost
    # more than the loop itself.
    ranked: list[int] = []
    rank_values: list[int] = []
    score_values: list[float] = []
    flagged_at: list[int] = []
    flags: dict[int, tuple[str, ...]] = {}
    unused: dict[int, str] = {}  # group position -> why its ranking could not be used
    flag_names = set(config.flag_names)
    passed_list = passed.tolist()
    for g, pk in enumerate(pks):
        final = rankings.get(pk)
        if final is None:
            continue
        start, end = bounds[g], bounds[g + 1]
        ids = trajectory_ids[start:end]
        if final.flags:
            flags.update((i, final.flags[tid]) for i, tid in enumerate(ids, start) if tid in final.flags)
        rank_of = final.ranks()
        reason = _unusable(final, rank_of, ids, passed_list[start:end], config)
        if reason:
            unused[g] = reason
            continue
        for i, tid in enumerate(ids, start):
            rank = rank_of.get(tid)
            if rank is None:
                continue
            ranked.append(i)
            rank_values.append(rank)
            if final.flags and flag_names.intersection(final.flags.get(tid, ())):
                flagged_at.append(i)
            if config.schedule == "scores":
                score_values.append(final.scores[tid])
    ranks = np.zeros(n, dtype=np.int64)
    ranks[ranked] = rank_values
    scores = np.full(n, np.nan)
    if config.schedule == "scores":
        scores[ranked] = score_values
    flagged = np.zeros(n, dtype=bool)
    flagged[flagged_at] = True
    use_flags = config.w_flag is not None and flagged.any()
    result = gagar_advantages(
        np.where(overridden, corrected, rewards), group_index, passed, ranks,
        schedule=config.schedule, params=config.params,
        scores=scores if config.schedule == "scores" else None,
        flagged=flagged if use_flags else None, w_flag=config.w_flag if use_flags else None,
        norm_by_std=config.norm_by_std, unbiased_std=config.unbiased_std, n_groups=len(pks),
    )
    source, reasons, grader, grader_version, ranking_version = [], [], [], [], []
    for g, (pk, reason) in enumerate(zip(pks, result.reason_names(), strict=True)):
        final = rankings.get(pk)
        if final is None:
            source.append("none")
            reasons.append("no_ranking")
            grader.append(None)
            grader_version.append(None)
            ranking_version.append(None)
            continue
        reason = unused.get(g, reason)
        source.append(final.source if reason == "redistributed" else "fallback")
        reasons.append(reason)
        grader.append(final.grader or None)
        grader_version.append(final.grader_version or None)
        ranking_version.append(_ranking_version(final))
    return AdvantageChunk(
        group_ids=[group_ids[pk] for pk in pks], group_index=group_index, trajectory_ids=trajectory_ids,
        reward=rewards, corrected_reward=corrected, passed=passed, grpo_advantage=result.grpo,
        factor=result.factors, rank=ranks, advantage=result.advantages, flags=flags,
        label=list(result.label_names()), source=source,
        source_reason=reasons, grader=grader, grader_version=grader_version, ranking_version=ranking_version,
    )


def _corrections(rankings: Mapping[int, FinalRanking], pks: list[int], bounds: list[int],
                 trajectory_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per trajectory, shape (n,): the corrected reward where its group's ranking overrode
    its test verdict, else NaN; and the verdict it was given (False where not overridden)."""
    corrected = np.full(len(trajectory_ids), np.nan)
    corrected_passed = np.zeros(len(trajectory_ids), dtype=bool)
    for g, pk in enumerate(pks):
        final = rankings.get(pk)
        if final is None or not final.verdicts:
            continue
        for i in range(bounds[g], bounds[g + 1]):
            verdict = final.verdicts.get(trajectory_ids[i])
            if verdict is not None:
                corrected[i] = corrected_reward(verdict["passed"])
                corrected_passed[i] = verdict["passed"]
    return corrected, corrected_passed


def _unusable(final: FinalRanking, rank_of: dict[str, int], ids: list[str], passed: list[bool],
              config: AdvantageConfig) -> str:
    """Why `final` cannot rank its group ("" if it can): it must rank exactly the passing
    trajectories and, for the scores schedule, score every one of them."""
    if set(rank_of) != {tid for tid, p in zip(ids, passed, strict=True) if p}:
        return RANKING_MISMATCH
    if config.schedule == "scores" and not (
            final.scores and all(math.isfinite(final.scores.get(t, math.nan)) for t in rank_of)):
        return MISSING_SCORES
    return ""


def _ranking_version(final: FinalRanking) -> str | None:
    """Which ranking it is: a human one by its version in the group's annotation history, a
    grader's by its grading id; an unsaved one (the editor's preview) has none."""
    if final.source == "human":
        return f"annotation:{final.version}"
    if final.source == "grader":
        return f"grading:{final.grading_id}"
    return None


@dataclass(frozen=True)
class AdvantageHistogram:
    """Counts per bin, shared edges (len(counts) + 1), for GRPO and redistributed advantages."""

    edges: list[float]
    before: list[int]
    after: list[int]
    n: int


def advantage_histogram(rows: list[dict], *, bins: int = 16) -> AdvantageHistogram:
    """Distribution of the advantages of the mixed groups' trajectories (`rows` of ROW_FIELDS),
    before and after redistribution (the other groups' advantages are all zero)."""
    mixed = [r for r in rows if r["label"] == "mixed"]
    if not mixed:
        return AdvantageHistogram(edges=[], before=[], after=[], n=0)
    before = np.array([r["grpo_advantage"] for r in mixed])
    after = np.array([r["advantage"] for r in mixed])
    low, high = float(min(before.min(), after.min())), float(max(before.max(), after.max()))
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    return AdvantageHistogram(
        edges=edges.tolist(),
        before=np.histogram(before, edges)[0].tolist(),
        after=np.histogram(after, edges)[0].tolist(),
        n=len(mixed),
    )
