"""Agreement between two rankings of the same trajectories, and over many groups;
agreement among several annotators; position bias. docs/audit.md defines each measure.

A ranking is tiers, best first: ``(("b",), ("a", "c"))`` ranks b above a and
c, which are tied. Measures compare the items both rankings contain.

>>> kendall_tau([["a"], ["b"], ["c"]], [["a"], ["c"], ["b"]])
0.333...
>>> pairwise_accuracy(reference=[["a"], ["b", "c"]], predicted=[["b"], ["a"], ["c"]])
0.5
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import sqrt

import numpy as np

Tiers = Sequence[Sequence[str]]


def positions(tiers: Tiers) -> dict[str, int]:
    """Tier index of each item (0 = best); tied items share it."""
    return {item: index for index, tier in enumerate(tiers) for item in tier}


def _common_positions(a: Tiers, b: Tiers) -> tuple[np.ndarray, np.ndarray]:
    """The tier index in a and in b of each item both contain, in item order."""
    pa, pb = positions(a), positions(b)
    common = sorted(pa.keys() & pb.keys())
    return (np.fromiter((pa[i] for i in common), dtype=np.int64, count=len(common)),
            np.fromiter((pb[i] for i in common), dtype=np.int64, count=len(common)))


@dataclass(frozen=True)
class PairCounts:
    """Over the pairs of items two rankings have in common (x and y their positions, lower
    better): sum of sign(x_i - x_j) * sign(y_i - y_j), the pairs each ranking orders, and the
    pairs the first orders and the second ties."""

    concordant_minus_discordant: int
    untied_a: int
    untied_b: int
    tied_b_only: int


def pair_counts(x: np.ndarray, y: np.ndarray) -> PairCounts:
    """`PairCounts` of positions `x` and `y` (integer arrays, one entry per item) in
    O(n log^2 n), not pairwise: tied pairs from the counts of equal values, discordant ones
    as the inversions of y ordered by (x, y), concordant the rest of the pairs untied in both.

    >>> pair_counts(np.array([0, 1, 2]), np.array([0, 2, 1]))
    PairCounts(concordant_minus_discordant=1, untied_a=3, untied_b=3, tied_b_only=0)
    """
    n = x.size
    pairs = n * (n - 1) // 2
    tied_a, tied_b = _tied_pairs(x), _tied_pairs(y)
    tied_both = _tied_pairs(x * (int(y.max(initial=0)) + 1) + y)  # positions are small: one key per (x, y)
    discordant = _inversions(y[np.lexsort((y, x))])
    concordant = pairs - tied_a - tied_b + tied_both - discordant
    return PairCounts(concordant - discordant, pairs - tied_a, pairs - tied_b, tied_b - tied_both)


def _tied_pairs(values: np.ndarray) -> int:
    counts = np.unique(values, return_counts=True)[1]
    return int((counts * (counts - 1) // 2).sum())


def _inversions(values: np.ndarray) -> int:
    """Pairs i < j with values[i] > values[j] (non-negative integers), by merging sorted runs
    bottom-up: at each level every right run counts the values of its left run above each of
    its own, all runs at once (runs are kept apart by an offset per merged pair)."""
    n = values.size
    if n < 2:
        return 0
    span = int(values.max()) + 1
    index = np.arange(n)
    runs = values.astype(np.int64)
    count, width = 0, 1
    while width < n:
        merged = index // (2 * width)
        keyed = runs + merged * span
        right = (index // width) % 2 == 1
        left = keyed[~right]  # sorted: each left run is, and the offsets keep them in order
        ends = np.searchsorted(left, (merged[right] + 1) * span, side="left")  # past its left run
        count += int((ends - np.searchsorted(left, keyed[right], side="right")).sum())
        runs = np.sort(keyed) - merged * span
        width *= 2
    return count


def kendall_tau(a: Tiers, b: Tiers) -> float | None:
    """Kendall's tau-b (ties in either ranking allowed); None when undefined:
    fewer than two common items, or one ranking ties them all."""
    counts = pair_counts(*_common_positions(a, b))
    if not counts.untied_a or not counts.untied_b:
        return None
    return counts.concordant_minus_discordant / sqrt(counts.untied_a * counts.untied_b)


def pairwise_accuracy(*, reference: Tiers, predicted: Tiers) -> float | None:
    """Of the pairs the reference orders, the share the prediction orders the same
    way; a pair the prediction ties counts half. None if the reference orders none."""
    counts = pair_counts(*_common_positions(reference, predicted))
    return _pairwise_accuracy(counts)


def _pairwise_accuracy(counts: PairCounts) -> float | None:
    if not counts.untied_a:
        return None
    # the pairs both order: concordant + discordant; their difference is counted too
    untied_both = counts.untied_a - counts.tied_b_only
    concordant = (untied_both + counts.concordant_minus_discordant) // 2
    return (concordant + 0.5 * counts.tied_b_only) / counts.untied_a


def top1_agreement(*, reference: Tiers, predicted: Tiers) -> bool | None:
    """Whether the prediction's best tier contains one of the reference's best."""
    if not reference or not predicted:
        return None
    return bool(set(reference[0]) & set(predicted[0]))


def top1_share(*, reference: Tiers, predicted: Tiers) -> float | None:
    """The chance that a pick made uniformly from the prediction's best tier is among the
    reference's best: a prediction that ties everything gets no more than chance."""
    if not reference or not predicted:
        return None
    return len(set(reference[0]) & set(predicted[0])) / len(predicted[0])


def spearman(a: Tiers, b: Tiers) -> float | None:
    """Spearman's rho over the common items: the Pearson correlation of their ranks, tied
    items sharing the mean of the ranks they span (as scipy.stats.spearmanr). None when
    fewer than two common items, or one ranking ties them all."""
    pa, pb = positions(a), positions(b)
    common = sorted(pa.keys() & pb.keys())
    return _pearson(average_ranks([pa[i] for i in common]), average_ranks([pb[i] for i in common]))


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks of `values`, ascending, equal values sharing the mean of their ranks.

    >>> average_ranks([10, 20, 20, 5]).tolist()
    [2.0, 3.5, 3.5, 1.0]
    """
    _, inverse, counts = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True,
                                   return_counts=True)
    last = np.cumsum(counts)
    return (last - (counts - 1) / 2)[inverse]


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if x.size < 2:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    spread = float(np.sqrt((dx @ dx) * (dy @ dy)))
    return float(dx @ dy) / spread if spread else None


@dataclass(frozen=True)
class GroupAgreement:
    """The four measures for one group; each None where undefined (see their functions)."""

    tau: float | None
    pairwise: float | None
    top1: bool | None
    spearman: float | None


def group_agreement(reference: Tiers, predicted: Tiers) -> GroupAgreement:
    return GroupAgreement(
        tau=kendall_tau(reference, predicted),
        pairwise=pairwise_accuracy(reference=reference, predicted=predicted),
        top1=top1_agreement(reference=reference, predicted=predicted),
        spearman=spearman(reference, predicted),
    )


def bootstrap_interval(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], float] = np.mean,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `statistic` over `values` (one per group)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return None
    rng = np.random.default_rng(seed)
    samples = data[rng.integers(0, data.size, size=(resamples, data.size))]
    stats = np.apply_along_axis(statistic, 1, samples) if statistic is not np.mean else samples.mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Estimate:
    value: float | None
    interval: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class AgreementSummary:
    kendall_tau: Estimate
    pairwise_accuracy: Estimate
    top1: Estimate
    spearman: Estimate


def summarise(
    pairs: Sequence[tuple[Tiers, Tiers]], *, seed: int = 0, resamples: int = 2000, confidence: float = 0.95
) -> AgreementSummary:
    """Mean agreement over (reference, predicted) rankings of many groups, each with a
    percentile bootstrap interval that resamples groups (`resamples` draws, seeded). Groups
    where a measure is undefined are left out of that measure; top-1 counts as 0 or 1."""
    per_group = [group_agreement(reference, predicted) for reference, predicted in pairs]

    def estimate(values: list) -> Estimate:
        return mean_estimate(values, seed=seed, resamples=resamples, confidence=confidence)

    return AgreementSummary(
        kendall_tau=estimate([g.tau for g in per_group]),
        pairwise_accuracy=estimate([g.pairwise for g in per_group]),
        top1=estimate([g.top1 for g in per_group]),
        spearman=estimate([g.spearman for g in per_group]),
    )


def mean_estimate(
    values: Sequence[float | bool | None], *, seed: int = 0, resamples: int = 2000, confidence: float = 0.95
) -> Estimate:
    """Mean of the defined values (one per group) with a percentile bootstrap interval over
    them; None values are left out and not counted in n."""
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return Estimate(None, None, 0)
    interval = bootstrap_interval(kept, seed=seed, resamples=resamples, confidence=confidence)
    return Estimate(float(np.mean(kept)), interval, len(kept))


@dataclass(frozen=True)
class Move:
    item: str
    before: int | None  # 1-based tier, None when absent
    after: int | None

    @property
    def change(self) -> int | None:
        """Positive when the item moved up (a better tier)."""
        if self.before is None or self.after is None:
            return None
        return self.before - self.after


def ranking_diff(before: Tiers, after: Tiers) -> list[Move]:
    """Where each item sat before and after, in the order of `after` then the dropped ones."""
    pa, pb = positions(before), positions(after)
    order = [item for tier in after for item in tier] + [i for tier in before for i in tier if i not in pb]
    return [
        Move(item, pa[item] + 1 if item in pa else None, pb[item] + 1 if item in pb else None)
        for item in order
    ]


# --- agreement among several annotators (k-way overlap) ----------------------------


def kendalls_w(rankings: Sequence[Tiers]) -> float | None:
    """Kendall's coefficient of concordance W over the items every ranking contains,
    with the correction for ties: 12 S / (m^2 (n^3 - n) - m sum_t (t^3 - t)), where S is
    the squared spread of the items' rank sums and t runs over each ranking's tie sizes.
    1 is perfect concordance, 0 none. None when fewer than two rankings or common items,
    or every ranking ties them all."""
    m = len(rankings)
    ranked = [positions(tiers) for tiers in rankings]
    common = sorted(set.intersection(*(set(p) for p in ranked))) if m else []
    n = len(common)
    if m < 2 or n < 2:
        return None
    ranks = np.array([average_ranks([p[item] for item in common]) for p in ranked])  # (m, n)
    spread = float(((ranks.sum(axis=0) - m * (n + 1) / 2) ** 2).sum())
    ties = sum(float((counts**3 - counts).sum()) for counts in
               (np.unique(row, return_counts=True)[1] for row in ranks))
    denominator = m**2 * (n**3 - n) - m * ties
    return 12 * spread / denominator if denominator else None


def mean_pairwise_tau(rankings: Sequence[Tiers]) -> float | None:
    """Mean Kendall tau-b over every two rankings; pairs where tau is undefined are left out."""
    taus = [tau for a, b in combinations(rankings, 2) if (tau := kendall_tau(a, b)) is not None]
    return sum(taus) / len(taus) if taus else None


def krippendorff_alpha_ordinal(groups: Sequence[Mapping[str, Tiers]]) -> float | None:
    """Krippendorff's alpha with the ordinal metric, over many groups.

    Each group maps a rater to their tiers for it. Each item of a group is a unit; its
    value from a rater is its average rank in that rater's tiers (as `average_ranks`), so
    rankings that tie differently stay comparable. An item a rater did not rank is a
    missing value. None when no item has two values or all values are equal.
    """
    units = []
    for by_rater in groups:
        values: dict[str, list[float]] = {}
        for tiers in by_rater.values():
            found = positions(tiers)
            items = sorted(found)
            for item, rank in zip(items, average_ranks([found[i] for i in items]), strict=True):
                values.setdefault(item, []).append(float(rank))
        units += [unit for unit in values.values() if len(unit) > 1]
    if not units:
        return None
    domain = np.unique(np.concatenate(units))
    coincidences = np.zeros((domain.size, domain.size))  # o_ck: pairs of values within units
    for unit in units:
        counts = np.bincount(np.searchsorted(domain, unit), minlength=domain.size).astype(np.float64)
        coincidences += (np.outer(counts, counts) - np.diag(counts)) / (len(unit) - 1)
    marginals = coincidences.sum(axis=1)
    total = marginals.sum()
    # ordinal distance: (sum of n_g for g from c to k, minus half of n_c and n_k) squared
    cumulative = np.cumsum(marginals)
    low, high = np.minimum.outer(np.arange(domain.size), np.arange(domain.size)), np.maximum.outer(
        np.arange(domain.size), np.arange(domain.size))
    distance = (cumulative[high] - cumulative[low] + marginals[low]
                - (marginals[:, None] + marginals[None, :]) / 2) ** 2
    expected = float((np.outer(marginals, marginals) * distance).sum())
    if not expected:
        return None
    return 1 - (total - 1) * float((coincidences * distance).sum()) / expected


# --- position bias -----------------------------------------------------------------


def rank_correlation_with(
    ranks: Sequence[float],
    values: Sequence[float],
    groups: Sequence[str],
    *,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> Estimate:
    """Per group, the Spearman correlation between the grader's rank of each trajectory
    (1 = best) and a covariate (the order it was shown in, patch length, turn count),
    averaged over groups with a bootstrap interval over groups. The three sequences are
    parallel, one entry per trajectory. Positive: larger values sit lower in the ranking.
    Groups where it is undefined (one trajectory, or a constant side) are left out."""
    if not len(ranks) == len(values) == len(groups):
        raise ValueError(f"ranks, values and groups differ in length: {len(ranks)}, {len(values)}, {len(groups)}")
    if not np.all(np.isfinite(np.asarray([*ranks, *values], dtype=np.float64))):
        raise ValueError("ranks and values must be finite numbers")
    by_group: dict[str, tuple[list[float], list[float]]] = {}
    for rank, value, group in zip(ranks, values, groups, strict=True):
        pair = by_group.setdefault(group, ([], []))
        pair[0].append(rank)
        pair[1].append(value)
    per_group = [_pearson(average_ranks(r), average_ranks(v)) for r, v in by_group.values()]
    return mean_estimate(per_group, seed=seed, resamples=resamples, confidence=confidence)


# --- many groups at once ---------------------------------------------------------------
# The dashboard measures tens of thousands of groups; per-group calls spend their time in
# numpy's per-call overhead. These take every group at once, in blocks of groups of about
# the same size, each padded to its widest: (G, K) arrays with a `valid` mask (and for the
# pairwise measures (G, K, K) ones), NaN where a measure is undefined, and give the
# per-group functions' values (tests compare them on random cases). A block holds at most
# BLOCK_CELLS cells, so memory is bounded by the widest group alone, never by a batch's
# group count times it; a group too wide for pairwise arrays (over PAIRWISE_WIDTH
# items) is measured alone through `pair_counts`.

BLOCK_CELLS = 1 << 20  # cells of one block's largest array: 8 MiB of float64
PAIRWISE_WIDTH = 256  # widest group measured through (K, K) arrays; wider ones through sorting


@dataclass(frozen=True)
class GroupAgreements:
    """`group_agreement` of many groups, one array entry per group, NaN where undefined (top-1 as 0.0 or 1.0)."""

    tau: np.ndarray
    pairwise: np.ndarray
    top1: np.ndarray
    spearman: np.ndarray


def blocks(widths: Sequence[int], cells: Callable[[int], int] = lambda width: width) -> list[np.ndarray]:
    """The indices of `widths` (a row's length each) in blocks of rows of about the same
    width, narrowest first, each with at most BLOCK_CELLS `cells(widest) * rows` (a row
    wider than that alone)."""
    widths = np.asarray(widths, dtype=np.int64)
    order = np.argsort(widths, kind="stable")
    out, start = [], 0
    while start < order.size:
        stop = start + 1
        while stop < order.size and cells(int(widths[order[stop]])) * (stop + 1 - start) <= BLOCK_CELLS:
            stop += 1
        out.append(order[start:stop])
        start = stop
    return out


def group_agreement_many(pairs: Sequence[tuple[Tiers, Tiers]]) -> GroupAgreements:
    """`group_agreement(reference, predicted)` of each pair, computed for all pairs at once."""
    rows_a, rows_b, empty = [], [], []
    for reference, predicted in pairs:
        pa, pb = positions(reference), positions(predicted)
        common = sorted(pa.keys() & pb.keys())
        rows_a.append([pa[i] for i in common])
        rows_b.append([pb[i] for i in common])
        empty.append(not reference or not predicted)
    out = GroupAgreements(*(np.full(len(pairs), np.nan) for _ in range(4)))
    for index in blocks([len(a) for a in rows_a], cells=lambda width: width * width):
        if len(rows_a[index[-1]]) > PAIRWISE_WIDTH:
            for i in index:
                _agreement_by_sorting(out, i, np.asarray(rows_a[i], dtype=np.int64),
                                      np.asarray(rows_b[i], dtype=np.int64))
            continue
        a, valid = padded([rows_a[i] for i in index])
        b, _ = padded([rows_b[i] for i in index])
        for name, values in zip(("tau", "pairwise", "top1", "spearman"), _agreement_block(a, b, valid), strict=True):
            getattr(out, name)[index] = values
    out.top1[np.asarray(empty, dtype=bool)] = np.nan
    return out


def _agreement_block(a: np.ndarray, b: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, ...]:
    """(tau, pairwise, top1, spearman) of each row of positions `a`, `b` (G, K), pairwise."""
    upper = np.triu(np.ones((a.shape[1], a.shape[1]), dtype=bool), 1)
    both = valid[:, :, None] & valid[:, None, :] & upper  # each common pair once
    sa = np.sign(a[:, :, None] - a[:, None, :]) * both
    sb = np.sign(b[:, :, None] - b[:, None, :]) * both
    untied_a, untied_b = (sa != 0).sum(axis=(1, 2)), (sb != 0).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = (sa * sb).sum(axis=(1, 2)) / np.sqrt(untied_a * untied_b)
        scores = np.where(sa == sb, 1.0, np.where(sb == 0, 0.5, 0.0)) * (sa != 0)
        pairwise = scores.sum(axis=(1, 2)) / untied_a
    tau[(untied_a == 0) | (untied_b == 0)] = np.nan
    pairwise[untied_a == 0] = np.nan
    top1 = (valid & (a == 0) & (b == 0)).any(axis=1).astype(np.float64)
    spearman_ = pearson_many(average_ranks_many(a, valid), average_ranks_many(b, valid), valid)
    return tau, pairwise, top1, spearman_


def _agreement_by_sorting(out: GroupAgreements, i: int, a: np.ndarray, b: np.ndarray) -> None:
    """Entry `i` of `out` for one wide group: `pair_counts` instead of (K, K) arrays."""
    counts = pair_counts(a, b)
    if counts.untied_a and counts.untied_b:
        out.tau[i] = counts.concordant_minus_discordant / sqrt(counts.untied_a * counts.untied_b)
    pairwise = _pairwise_accuracy(counts)
    out.pairwise[i] = np.nan if pairwise is None else pairwise
    out.top1[i] = float(bool(((a == 0) & (b == 0)).any()))
    valid = np.ones((1, a.size), dtype=bool)
    out.spearman[i] = pearson_many(average_ranks_many(a[None, :], valid), average_ranks_many(b[None, :], valid),
                                   valid)[0]


def padded(rows: Sequence[Sequence[float]], dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Rows of unequal length as one (len(rows), widest) array, zero-padded, and its `valid` mask."""
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max()) if len(rows) else 0
    valid = np.arange(width) < lengths[:, None]
    out = np.zeros(valid.shape, dtype=dtype)
    out[valid] = np.fromiter((x for row in rows for x in row), dtype=dtype, count=int(lengths.sum()))
    return out, valid


def average_ranks_many(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """`average_ranks` of each row's valid entries (0 where not valid), by sorting each row:
    an entry's rank is the end of its run of equal values, less half the run's spread."""
    if not values.size:
        return np.zeros(values.shape)
    order = np.lexsort((values, ~valid), axis=1)  # each row: valid entries first, ascending
    ordered = np.take_along_axis(values, order, axis=1)
    kept = np.take_along_axis(valid, order, axis=1)
    position = np.broadcast_to(np.arange(values.shape[1]), values.shape)
    starts = np.ones(values.shape, dtype=bool)  # where a run of equal valid values starts
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    start = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    ends = np.ones(values.shape, dtype=bool)  # where one ends
    ends[:, :-1] = starts[:, 1:] | ~kept[:, 1:]
    end = np.flip(np.minimum.accumulate(np.flip(np.where(ends, position + 1, values.shape[1]), axis=1), axis=1),
                  axis=1)
    ranks = np.zeros(values.shape)
    # as average_ranks: the last rank of the ties (values at most this one), less half their spread
    np.put_along_axis(ranks, order, np.where(kept, end - (end - start - 1) / 2, 0.0), axis=1)
    return ranks


def pearson_many(x: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The Pearson correlation of each row's valid entries of x and y; NaN where fewer than
    two or one side is constant (as `_pearson`'s None)."""
    n = valid.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = np.where(valid, x - (x * valid).sum(axis=1, keepdims=True) / n[:, None], 0.0)
        dy = np.where(valid, y - (y * valid).sum(axis=1, keepdims=True) / n[:, None], 0.0)
        spread = np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
        out = (dx * dy).sum(axis=1) / spread
    out[(n < 2) | (spread == 0)] = np.nan
    return out


def rank_correlation_many(ranks: np.ndarray, values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per row (a group), the Spearman correlation `rank_correlation_with` averages: the
    Pearson correlation of the average ranks of its valid ranks and values; NaN where undefined."""
    return pearson_many(average_ranks_many(ranks, valid), average_ranks_many(values, valid), valid)


def rank_correlation_rows(ranks: Sequence[Sequence[float]], values: Sequence[Sequence[float]]) -> np.ndarray:
    """`rank_correlation_many` of rows of unequal length (one group each), padded a block of
    groups of about the same size at a time."""
    out = np.full(len(ranks), np.nan)
    for index in blocks([len(row) for row in ranks]):
        r, valid = padded([ranks[i] for i in index], dtype=np.float64)
        v, _ = padded([values[i] for i in index], dtype=np.float64)
        out[index] = rank_correlation_many(r, v, valid)
    return out


BOOTSTRAP_ROWS = 100  # resamples drawn and averaged at a time: a (100 x n) block stays in cache


def mean_estimates(
    columns: Sequence[np.ndarray], *, seed: int = 0, resamples: int = 2000, confidence: float = 0.95
) -> list[Estimate]:
    """`mean_estimate` of each column (NaN for None), the same figures: the same seeded draws
    (numpy draws 32-bit integers below 2**32 whatever the dtype, so int32 indices are the
    same as bootstrap_interval's int64 ones) and the same per-row means. Columns with the same
    count of defined values share one pass over the draws, made and averaged a block at a time."""
    kept = [np.asarray(c, dtype=np.float64)[~np.isnan(np.asarray(c, dtype=np.float64))] for c in columns]
    by_size: dict[int, list[int]] = {}
    for i, values in enumerate(kept):
        if values.size:
            by_size.setdefault(values.size, []).append(i)
    stats = {i: np.empty(resamples) for indices in by_size.values() for i in indices}
    for size, indices in by_size.items():
        rng = np.random.default_rng(seed)
        for start in range(0, resamples, BOOTSTRAP_ROWS):
            rows = min(BOOTSTRAP_ROWS, resamples - start)
            draws = rng.integers(0, size, size=(rows, size), dtype=np.int32)
            for i in indices:
                stats[i][start:start + rows] = kept[i][draws].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    out = []
    for i, values in enumerate(kept):
        if not values.size:
            out.append(Estimate(None, None, 0))
            continue
        low, high = np.percentile(stats[i], [tail, 100 - tail])
        out.append(Estimate(float(np.mean(values)), (float(low), float(high)), int(values.size)))
    return out
