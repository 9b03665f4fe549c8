"""An audit set's report: what was drawn and how, what the auditors said, and how far the audited
gradings agree with people, with intervals. One plain dict (grading.audit_report) that the JSON
download writes byte for byte, the HTML page shows, and `manage.py audit_report` saves.

The report holds no database ids and no time unless an "as of" is given, so the same audit gives
the same bytes on SQLite and PostgreSQL. Groups are named by their group id (a set over a grader
version spans batches, so there it is "<batch>/<group id>"); a verdict is named by its group and
its auditor, "<group> (<auditor>)", since several auditors may judge one group.

The set's measures ("measures": value, 95% interval, n):
- kendall_tau, pairwise_accuracy, top1, spearman: the audited grading against the group's final
  ranking where a person ranked the group (grading.agreement.summarise: bootstrap over groups);
- verdict:<verdict>: the share of the set's verdicts that say it; category:<category>: the share
  that mark it (Wilson intervals, as the dashboard: grading.rates.wilson).

"versions" holds, per grader version audited, the dashboard's figures over the set's batch (every
batch for a set over a grader version), from webapp.audit.figures: agreement with people, the
reference proxy, position bias, failure rate, cost, and verdict and category rates over every
audit of that version.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.utils.text import slugify

from grading.agreement import Estimate, summarise
from grading.audit_report import build_report
from grading.rates import wilson
from webapp.audit.figures import ranking_figures, require_selection, verdict_figures
from webapp.audit.forms import FEATURE_LABELS
from webapp.audit.ranking import COVARIATES
from webapp.audit.sampling import stratum_rows
from webapp.audit.selectors import next_item
from webapp.models import AuditSet, AuditVerdict
from webapp.rankings import Viewer, chain_heads, human_ranking
from webapp.roles import RESEARCHER, has_role

AGREEMENT = ("kendall_tau", "pairwise_accuracy", "top1", "spearman")
FILE_STYLES = ("css/app.css", "css/audit-report.css")  # inlined into the HTML file the command writes
AGREEMENT_LABELS = {"kendall_tau": "Kendall tau-b", "pairwise_accuracy": "pairwise accuracy",
                    "top1": "top-1 agreement", "spearman": "Spearman rho"}


@dataclass(frozen=True)
class ItemLink:
    """Where a group of the report is in the app: its auditor's page and its group page."""

    item_pk: int
    group_pk: int
    position: int


@dataclass(frozen=True)
class SetReport:
    data: dict  # grading.audit_report's plain dict: what the JSON holds
    links: dict[str, ItemLink]  # group key, and verdict key, -> where it is


def may_read_report(audit_set: AuditSet, user) -> bool:
    """The report shows every auditor's verdicts, which the auditor's page hides until you give
    your own (selectors.visible_verdicts): an auditor reads it once they judged every item of the
    set; a researcher any time."""
    return has_role(user, RESEARCHER) or next_item(audit_set, user) is None


def report_filename(audit_set: AuditSet) -> str:
    """The download's name: the same for a set every time."""
    slug = slugify(audit_set.name)
    return f"audit-report-{audit_set.pk}{'-' + slug if slug else ''}.json"


def set_report(audit_set: AuditSet, *, viewer: Viewer, as_of: str | None = None) -> SetReport:
    """The report of `audit_set` as it stands; `as_of` (a time, as text) is written as given.
    It is over every ranking of the set's batch (of every batch for a set over a grader version,
    as its versions' figures): RankingsHidden unless `viewer` may see them all."""
    require_selection(audit_set.batch, viewer=viewer)
    items = list(audit_set.items.values_list("pk", "position", "group_id", "group__group_id", "group__batch__name",
                                             "grading__tiers", "grading__grader_version"))
    spans_batches = audit_set.batch_id is None
    keys, links, audited, versions = {}, {}, {}, set()
    for pk, position, group_pk, group_id, batch_name, tiers, version in items:
        key = f"{batch_name}/{group_id}" if spans_batches else group_id
        keys[pk] = key
        links[key] = ItemLink(item_pk=pk, group_pk=group_pk, position=position)
        audited[group_pk] = tiers
        versions.add(version)

    verdicts, categories = {}, {}
    rows = AuditVerdict.objects.filter(item__audit_set=audit_set).values_list(
        "item_id", "auditor__username", "verdict", "categories")
    for item_pk, auditor, verdict, marked in rows:
        key = f"{keys[item_pk]} ({auditor})"
        links[key] = links[keys[item_pk]]
        verdicts[key] = verdict
        categories[key] = marked

    humans = {head.group_id: human_ranking(head) for head in chain_heads(audited, viewer=viewer)}
    # In group order, as the dashboard's figures: the same groups give the same bootstrap draws.
    pairs = [(humans[group].tiers, tuple(tuple(tier) for tier in audited[group]))
             for group in sorted(audited) if humans.get(group) is not None]
    agreement = summarise(pairs)
    measures: dict[str, Estimate] = {name: getattr(agreement, name) for name in AGREEMENT}
    for value in AuditVerdict.Verdict.values:
        measures[f"verdict:{value}"] = _share(sum(v == value for v in verdicts.values()), len(verdicts))
    for value in AuditVerdict.Category.values:
        measures[f"category:{value}"] = _share(sum(value in c for c in categories.values()), len(verdicts))

    data = build_report(design=_design(audit_set, sorted(versions)), strata=_strata(audit_set), measures=measures,
                        verdicts=verdicts, error_categories=categories, generated_at=as_of)
    data["human_ranked"] = len(pairs)
    data["versions"] = _version_figures(audit_set, sorted(versions))
    return SetReport(data=data, links=links)


def _share(count: int, n: int) -> Estimate:
    rate = wilson(count, n)
    return Estimate(rate.value, rate.interval, n)


def _version_figures(audit_set: AuditSet, versions: list[str]) -> dict:
    ranking = ranking_figures(audit_set.batch, versions)
    verdicts = verdict_figures(audit_set.batch, versions)
    return {version: {
        "graded": ranking[version].graded,
        "agreement": asdict(ranking[version].agreement),
        "proxy": asdict(ranking[version].proxy),
        "position_bias": {key: asdict(estimate) for key, estimate in ranking[version].bias.items()},
        "failure": asdict(ranking[version].failure),
        "cost": asdict(ranking[version].cost),
        "verdicts": {value: asdict(rate) for value, rate in zip(AuditVerdict.Verdict.values,
                                                                 verdicts[version].verdicts, strict=True)},
        "categories": {value: asdict(rate) for value, rate in zip(AuditVerdict.Category.values,
                                                                   verdicts[version].categories, strict=True)},
    } for version in versions}


def _design(audit_set: AuditSet, versions: list[str]) -> dict:
    design = audit_set.design
    half_width = design.get("half_width")
    return {
        "audit_set": audit_set.name,
        "source": "run" if audit_set.run_id else "batch" if audit_set.batch_id else "grader version",
        "batch": audit_set.batch.name if audit_set.batch_id else None,
        "run": audit_set.run_id,
        "grader": audit_set.run.grader if audit_set.run_id else None,
        "grader_version": audit_set.grader_version or None,
        "grader_versions_audited": versions,
        "stratify_by": design["stratify_by"],
        "bins": design["bins"],
        "seed": design["seed"],
        "size": audit_set.size,
        "population": design["population"],
        "target": (f"+-{half_width} at {round(design['confidence'] * 100)}%" if half_width is not None else None),
    }


@dataclass(frozen=True)
class StoredStratum:
    """A stratum as the set stores it (design["quotas"]): what build_report reads of a Stratum."""

    label: str
    low: float | None
    high: float | None
    population: int
    quota: int


def _strata(audit_set: AuditSet) -> list[StoredStratum]:
    return [StoredStratum(label=q["stratum"], low=q["low"], high=q["high"], population=q["population"],
                          quota=q["quota"]) for q in audit_set.design["quotas"]]


@dataclass(frozen=True)
class Row:
    """One line of a table on the report page: a measure, its count, the groups behind it."""

    name: str
    label: str
    measure: dict  # {"value", "interval", "n"} as in the report
    count: int | None = None
    groups: tuple[tuple[str, ItemLink], ...] = ()


def page_rows(report: SetReport) -> dict[str, list[Row]]:
    """The report's tables as the HTML page shows them: agreement, verdicts, error categories.
    Verdicts and categories come in their models' order, each with its linked groups."""
    data, measures = report.data, report.data["measures"]

    def counted(section: str, prefix: str, choices) -> list[Row]:
        rows = []
        for value, label in choices:
            found = data[section].get(value, {"count": 0, "groups": []})
            rows.append(Row(name=value, label=label, measure=measures[f"{prefix}:{value}"], count=found["count"],
                            groups=tuple((key, report.links[key]) for key in found["groups"])))
        return rows

    return {
        "agreement": [Row(name=name, label=AGREEMENT_LABELS[name], measure=measures[name]) for name in AGREEMENT],
        "versions": [(version, _version_rows(figures)) for version, figures in data["versions"].items()],
        "verdicts": counted("verdicts", "verdict", AuditVerdict.Verdict.choices),
        "categories": counted("error_categories", "category", AuditVerdict.Category.choices),
    }


def _version_rows(figures: dict) -> list[tuple[str, list[Row]]]:
    """A grader version's figures as the page's tables, each (heading, rows)."""
    proxy = figures["proxy"]
    return [
        ("Agreement with people", [Row(name=name, label=AGREEMENT_LABELS[name], measure=figures["agreement"][name])
                                   for name in AGREEMENT]),
        (proxy["label"].capitalize(), [Row(name="proxy-tau", label="Kendall tau-b", measure=proxy["kendall_tau"]),
                                       Row(name="proxy-top1", label="top-1 share", measure=proxy["top1"])]),
        ("Position bias: rank against", [Row(name=f"bias-{key}", label=label, measure=figures["position_bias"][key])
                                         for key, label in COVARIATES]),
        ("Verdicts, every audit of this version", [
            Row(name=f"v-{value}", label=rate["label"], measure=rate, count=rate["count"])
            for value, rate in figures["verdicts"].items()]),
        ("Error categories, every audit of this version", [
            Row(name=f"c-{value}", label=rate["label"], measure=rate, count=rate["count"])
            for value, rate in figures["categories"].items()]),
        ("Gradings", [Row(name="failure", label="failure rate", measure=figures["failure"],
                          count=figures["failure"]["count"])]),
    ]


def page_context(audit_set: AuditSet, report: SetReport) -> dict:
    """What the report's template needs, on the site and in a file."""
    strata = stratum_rows([(s["label"], s["low"], s["high"], s["population"], s["quota"])
                           for s in report.data["strata"]])
    return {"audit_set": audit_set, "report": report.data, "rows": page_rows(report), "strata": strata,
            "feature_labels": FEATURE_LABELS}


def report_file_html(audit_set: AuditSet, *, viewer: Viewer, as_of: str | None = None) -> str:
    """The report as one HTML file that reads away from the site: the page's body with its styles inline."""
    styles = "\n".join(open(finders.find(name), encoding="utf-8").read() for name in FILE_STYLES)
    # Our own stylesheets, not user input: kept as they are inside <style>.
    context = page_context(audit_set, set_report(audit_set, viewer=viewer, as_of=as_of)) | {"styles": mark_safe(styles)}
    return render_to_string("audit/report_file.html", context)
