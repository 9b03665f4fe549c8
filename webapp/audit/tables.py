"""The dashboard's tables: the figures of `webapp.audit.figures` as rows of text, the same
cells under each chart and in its CSV download."""

from __future__ import annotations

from dataclasses import dataclass

from grading.agreement import Estimate
from grading.evaluation import PROXY_LABEL
from grading.rates import Rate
from webapp.audit.concordance import BatchConcordance
from webapp.audit.correctness import Correctness
from webapp.audit.figures import DRIFT_MEASURES, MEASURES, Dashboard
from webapp.audit.ranking import COVARIATES, Histogram


@dataclass(frozen=True)
class Table:
    name: str  # the CSV's name: /audit/dashboard/<name>.csv
    title: str
    header: list[str]
    rows: list[list[str]]


def cell(value) -> str:
    """A number as the tables show it: floats to 4 decimals, None (undefined) as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _estimate(e: Estimate) -> list[str]:
    low, high = e.interval or (None, None)
    return [cell(e.value), cell(low), cell(high), cell(e.n)]


def _rate(r: Rate) -> list[str]:
    low, high = r.interval or (None, None)
    return [cell(r.count), cell(r.n), cell(r.value), cell(low), cell(high)]


def _histogram(version: str, h: Histogram) -> list[list[str]]:
    return [[version, cell(h.edges[i]), cell(h.edges[i + 1]), cell(count)] for i, count in enumerate(h.counts)]


def _correctness(version: str, c: Correctness) -> list[list[str]]:
    """Per reference with groups: pairwise accuracy, then the top-1 rate, each for the version
    and then the baselines (on the same groups)."""
    return [[version, reference, r.name, measure, *_estimate(getattr(r, key))]
            for reference, top1, results in c.references()
            for key, measure in (("pairwise", "pairwise accuracy"), ("top1", top1)) for r in results]


def _concordance(c: BatchConcordance) -> list[list[str]]:
    return [[c.batch, "Kendall's W", *_estimate(c.kendalls_w), cell(c.raters)],
            [c.batch, "mean pairwise Kendall tau-b", *_estimate(c.pairwise_tau), cell(c.raters)],
            [c.batch, "Krippendorff's alpha (ordinal)", cell(c.alpha), "", "", cell(c.groups), cell(c.raters)]]


def dashboard_tables(d: Dashboard) -> dict[str, Table]:
    versions = d.versions
    tables = [
        Table("correctness", "Correctness (people's verdicts)",
              ["version", "reference", "ranking", "measure", "value", "low", "high", "groups"],
              [row for v in versions for row in _correctness(v.version.version, v.correctness)]),
        Table("agreement", "Agreement with human rankings",
              ["version", "grader", "measure", "value", "low", "high", "groups"],
              [[v.version.version, v.version.grader, label, *_estimate(getattr(v.ranking.agreement, key))]
               for v in versions for key, label in MEASURES]),
        Table("concordance", "Agreement among annotators who ranked the same groups independently (k-way overlap)",
              ["batch", "measure", "value", "low", "high", "groups", "annotators"],
              [row for c in (d.concordance.batches if d.concordance else []) for row in _concordance(c)]),
        Table("proxy", f"Diagnostic, not a target: reference calibration ({PROXY_LABEL})",
              ["version", "measure", "value", "low", "high", "groups"],
              [[v.version.version, f"{label} ({PROXY_LABEL})", *_estimate(getattr(v.ranking.proxy, key))]
               for v in versions for key, label in (("kendall_tau", "Kendall tau-b"), ("top1", "top-1"))]),
        Table("verdicts", "Auditors' verdicts", ["version", "verdict", "count", "verdicts", "share", "low", "high"],
              [[v.version.version, r.label, *_rate(r)] for v in versions for r in v.verdicts.verdicts]),
        Table("categories", "Error categories (share of verdicts naming each)",
              ["version", "category", "count", "verdicts", "share", "low", "high"],
              [[v.version.version, r.label, *_rate(r)] for v in versions for r in v.verdicts.categories]),
        Table("failures", "Grading failure rate", ["version", "failed", "finished", "rate", "low", "high"],
              [[v.version.version, *_rate(v.ranking.failure)] for v in versions]),
        Table("cost", "Cost per graded group",
              ["version", "groups", "tokens mean", "tokens p50", "tokens p95", "seconds mean", "seconds p50",
               "seconds p95"],
              [[v.version.version, cell(v.ranking.cost.groups),
                *(cell(getattr(s, k)) for s in (v.ranking.cost.tokens, v.ranking.cost.seconds)
                  for k in ("mean", "p50", "p95"))] for v in versions]),
        Table("bias", "Position bias: Spearman rho of rank (1 = best) with each covariate, mean over groups",
              ["version", "covariate", "rho", "low", "high", "groups"],
              [[v.version.version, label, *_estimate(v.ranking.bias[key])] for v in versions
               for key, label in COVARIATES]),
        Table("factors", "Distribution of the schedule's factors (ranked trajectories)",
              ["version", "from", "to", "trajectories"],
              [row for v in versions for row in _histogram(v.version.version, v.ranking.factors)]),
        Table("shifts", "Advantage shifts: redistributed minus GRPO (passing trajectories of mixed groups)",
              ["version", "from", "to", "trajectories"],
              [row for v in versions for row in _histogram(v.version.version, v.ranking.shifts)]),
        Table("drift", "Agreement with the gold set, per version over time",
              ["version", "first run", "measure", "value", "low", "high", "groups"],
              [[p.version.version, p.version.first_run_at.strftime("%Y-%m-%d %H:%M"), label,
                *_estimate(getattr(p.agreement, key))]
               for p in (d.drift.points if d.drift else []) for key, label in DRIFT_MEASURES]),
    ]
    return {t.name: t for t in tables}
