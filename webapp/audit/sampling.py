"""What an audit set is drawn from: the gradings audited and each group's features.

A source is a batch (each group's latest finished grading), one grading run,
or a grader version (its latest finished grading of each group, in every
batch). The features stratify the draw (grading.audit_sampling.STRATA), each
computed from what the database holds:

- confidence: the audited grading's confidence;
- margin: the gap between the grader's two best scores;
- disagreement: 1 - Kendall tau between the audited grading and the group's
  latest finished grading by another grader (heuristic vs agentic); none
  when no other grader graded the group;
- patch_size: the mean changed lines (added + removed) of the passing patches;
- pass_rate: the group's share of passing trajectories.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from grading.agreement import kendall_tau
from grading.audit_sampling import AuditCandidate, Stratum, quotas, sample_audit_set, size_for_interval
from grading.diffs import parse_patch
from webapp.models import Batch, Grading, GradingRun, Trajectory
from webapp.rankings import CHUNK


class SourceError(ValueError):
    """A source that names nothing there is, or a draw that cannot be made."""


@dataclass(frozen=True)
class Source:
    """What a set audits: a batch, a run (with its batch) or a grader version."""

    batch: Batch | None = None
    run: GradingRun | None = None
    grader_version: str = ""

    @classmethod
    def parse(cls, value: str) -> Source:
        """From the form's value: "batch:<pk>", "run:<pk>" or "version:<grader version>"."""
        kind, _, rest = value.partition(":")
        if kind == "version" and rest:
            if not Grading.objects.filter(status=Grading.Status.DONE, grader_version=rest).exists():
                raise SourceError(f"no finished grading has the grader version {rest!r}")
            return cls(grader_version=rest)
        if kind in ("batch", "run") and rest.isdigit():
            model = Batch if kind == "batch" else GradingRun
            found = model.objects.select_related(*(("batch",) if kind == "run" else ())).filter(pk=int(rest)).first()
            if found is None:
                raise SourceError(f"there is no {kind} {rest}")
            return cls(batch=found) if kind == "batch" else cls(batch=found.batch, run=found)
        raise SourceError(f"not a source: {value[:80]!r}")

    @property
    def value(self) -> str:
        if self.run is not None:
            return f"run:{self.run.pk}"
        return f"batch:{self.batch.pk}" if self.batch is not None else f"version:{self.grader_version}"

    @property
    def label(self) -> str:
        if self.run is not None:
            return f"run #{self.run.pk}: {self.run.grader} on {self.run.batch.name}"
        if self.batch is not None:
            return f"batch {self.batch.name}: each group's latest grading"
        return f"grader version {self.grader_version}, every batch"


@dataclass(frozen=True)
class Audited:
    """One grading a set may audit, with what the features need."""

    grading_pk: int
    group_pk: int
    grader: str
    tiers: list
    scores: dict | None
    confidence: float | None
    pass_rate: float
    batch_name: str
    group_id: str

    @property
    def key(self) -> str:
        """The group's name for the draw: the same seed draws the same groups on any database
        and after a re-import, where primary keys differ."""
        return f"{self.batch_name}/{self.group_id}"


def source_choices() -> list[tuple[str, str]]:
    """Every source that has finished gradings, for the form: batches, runs, grader versions."""
    done = Grading.objects.filter(status=Grading.Status.DONE)
    batches = Batch.objects.filter(pk__in=done.values("run__batch")).order_by("name")
    runs = GradingRun.objects.filter(pk__in=done.values("run")).select_related("batch").order_by("-pk")
    versions = sorted(set(done.exclude(grader_version="").values_list("grader_version", flat=True)))
    return ([(Source(batch=b).value, Source(batch=b).label) for b in batches]
            + [(Source(batch=r.batch, run=r).value, Source(batch=r.batch, run=r).label) for r in runs]
            + [(Source(grader_version=v).value, Source(grader_version=v).label) for v in versions])


def population(source: Source) -> list[Audited]:
    """The gradings `source` audits, one per group, by group pk."""
    rows = Grading.objects.filter(status=Grading.Status.DONE, tiers__isnull=False)
    if source.run is not None:
        rows = rows.filter(run=source.run)
    else:
        if source.batch is not None:
            rows = rows.filter(group__batch=source.batch)
        if source.grader_version:
            rows = rows.filter(grader_version=source.grader_version)
        rows = rows.annotate(latest=Window(RowNumber(), partition_by=[F("group_id")],
                                           order_by=[F("finished_at").desc(), F("pk").desc()])).filter(latest=1)
    fields = ("pk", "group_id", "run__grader", "tiers", "scores", "confidence", "group__pass_rate",
              "group__batch__name", "group__group_id")
    return sorted((Audited(*row) for row in rows.values_list(*fields)), key=lambda a: a.group_pk)


def features(audited: Sequence[Audited], feature: str | None) -> dict[int, float | None]:
    """The value of `feature` for each audited group, by group pk; {} for a uniform draw."""
    if feature is None:
        return {}
    if feature == "confidence":
        return {a.group_pk: a.confidence for a in audited}
    if feature == "pass_rate":
        return {a.group_pk: a.pass_rate for a in audited}
    if feature == "margin":
        return {a.group_pk: _margin(a.scores) for a in audited}
    if feature == "disagreement":
        return _disagreement(audited)
    if feature == "patch_size":
        return _patch_size([a.group_pk for a in audited])
    raise SourceError(f"unknown feature {feature!r}")


def _margin(scores: dict | None) -> float | None:
    best = sorted((scores or {}).values(), reverse=True)
    return best[0] - best[1] if len(best) >= 2 else None


def _disagreement(audited: Sequence[Audited]) -> dict[int, float | None]:
    out: dict[int, float | None] = {a.group_pk: None for a in audited}
    by_group = {a.group_pk: a for a in audited}
    pks = list(by_group)
    for start in range(0, len(pks), CHUNK):
        others = (Grading.objects.filter(group_id__in=pks[start:start + CHUNK], status=Grading.Status.DONE,
                                         tiers__isnull=False)
                  .order_by("group_id", "-finished_at", "-pk").values_list("group_id", "run__grader", "tiers"))
        seen = set()
        for group_pk, grader, tiers in others:
            own = by_group[group_pk]
            if group_pk in seen or grader == own.grader:
                continue
            seen.add(group_pk)
            tau = kendall_tau(own.tiers, tiers)
            out[group_pk] = None if tau is None else 1 - tau
    return out


def _patch_size(group_pks: list[int]) -> dict[int, float | None]:
    sizes: dict[int, list[int]] = {pk: [] for pk in group_pks}
    for start in range(0, len(group_pks), CHUNK):
        rows = Trajectory.objects.filter(group_id__in=group_pks[start:start + CHUNK], passed=True)
        for group_pk, patch in rows.values_list("group_id", "patch").iterator():
            parsed = parse_patch(patch)
            sizes[group_pk].append(parsed.added + parsed.removed)
    return {pk: fmean(lines) if lines else None for pk, lines in sizes.items()}


@dataclass(frozen=True)
class Plan:
    """A draw, before anything is stored: the population, the size and each stratum's quota."""

    source: Source
    audited: list[Audited]
    size: int
    stratify_by: str | None
    bins: int
    seed: int
    half_width: float | None
    confidence: float | None
    strata: list[Stratum]
    candidates: list[AuditCandidate]

    def drawn(self) -> list[Audited]:
        """The audited gradings drawn, by group pk."""
        keys = set(sample_audit_set(self.candidates, size=self.size, stratify_by=self.stratify_by,
                                    seed=self.seed, bins=self.bins))
        return [a for a in self.audited if a.key in keys]

    def design(self) -> dict:
        return {
            "stratify_by": self.stratify_by, "bins": self.bins, "seed": self.seed,
            "half_width": self.half_width, "confidence": self.confidence, "population": len(self.audited),
            "quotas": [{"stratum": s.label, "low": s.low, "high": s.high, "population": s.population,
                        "quota": s.quota} for s in self.strata],
        }


def audit_plan(*, source: Source, stratify_by: str | None, bins: int, seed: int, size: int | None,
               half_width: float | None, confidence: float) -> Plan:
    """How a set would be drawn: `size` groups, or as many as a proportion needs to be known to
    +-`half_width` at `confidence` (computed over the population)."""
    audited = population(source)
    if not audited:
        raise SourceError(f"{source.label} has no finished gradings to audit")
    if size is None:
        size = size_for_interval(half_width, confidence=confidence, population=len(audited))
    values = features(audited, stratify_by)
    candidates = [AuditCandidate(a.key, {stratify_by: values[a.group_pk]} if stratify_by else {})
                  for a in audited]
    try:
        strata = quotas(candidates, size=size, stratify_by=stratify_by, bins=bins)
    except ValueError as error:
        raise SourceError(str(error)) from None
    return Plan(source=source, audited=audited, size=size, stratify_by=stratify_by, bins=bins, seed=seed,
                half_width=half_width, confidence=confidence if half_width is not None else None,
                strata=strata, candidates=candidates)


# --- strata as pages show them ----------------------------------------------------------------


@dataclass(frozen=True)
class StratumRow:
    name: str  # its values, rounded (`value_ranges`), or its label when it has none (unknown, all)
    population: int
    quota: int


def stratum_rows(strata: Sequence[tuple[str, float | None, float | None, int, int]]) -> list[StratumRow]:
    """(label, low, high, population, quota) of each stratum of a draw, as a table's rows. The
    label stays what the draw stored (it seeds the stratum's shuffle); pages show the values."""
    names = value_ranges([(low, high) for _, low, high, _, _ in strata])
    return [StratumRow(name or label, population, quota)
            for (label, _, _, population, quota), name in zip(strata, names, strict=True)]


def value_ranges(ranges: Sequence[tuple[float | None, float | None]]) -> list[str | None]:
    """Each (low, high) of a feature's strata as people read it, all with the same decimals:
    none where every value is a whole number (a count), else three significant figures of the
    largest, more where that would print two different values alike. None for (None, None).

    >>> value_ranges([(1.0, 5.0), (5.333333, 6.5), (None, None)])
    ['1.0 to 5.0', '5.3 to 6.5', None]
    >>> value_ranges([(2.0, 4.0), (7.0, 7.0)])
    ['2 to 4', '7']
    """
    values = sorted({v for pair in ranges for v in pair if v is not None})
    decimals = 0
    if any(v != int(v) for v in values):
        decimals = max(0, 2 - math.floor(math.log10(max(abs(v) for v in values))))
        while decimals < 6 and len({f"{v:.{decimals}f}" for v in values}) < len(values):
            decimals += 1
    out = []
    for low, high in ranges:
        if low is None or high is None:
            out.append(None)
            continue
        low_text, high_text = f"{low:.{decimals}f}", f"{high:.{decimals}f}"
        out.append(low_text if low_text == high_text else f"{low_text} to {high_text}")
    return out
