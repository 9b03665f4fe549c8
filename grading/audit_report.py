"""An audit's report as plain data, and its canonical JSON bytes.

`build_report` gathers what an audit decided: how the groups were drawn, the measures
with their intervals, and which groups got which verdict and error category.
`report_json` writes any such dict the same way every time: keys sorted, floats rounded
to FLOAT_DIGITS decimals, two-space indent, UTF-8, one trailing newline. So the same audit
gives the same bytes, and nothing in them changes between runs unless its caller passes it
(a time is in the report only as `generated_at`).

>>> report_json({"b": 0.1 + 0.2, "a": [1, None]})
b'{\\n  "a": [\\n    1,\\n    null\\n  ],\\n  "b": 0.3\\n}\\n'
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from math import isfinite

from grading.agreement import Estimate
from grading.audit_sampling import Stratum

FORMAT = "gagar-audit-report/1"
FLOAT_DIGITS = 6


def build_report(
    *,
    design: Mapping[str, object],
    strata: Sequence[Stratum],
    measures: Mapping[str, Estimate],
    verdicts: Mapping[str, str],
    error_categories: Mapping[str, Iterable[str]],
    generated_at: str | None = None,
) -> dict:
    """The report of one audit.

    design: plain facts of the draw, e.g. {"batch": ..., "grader": ..., "stratify_by": ...,
        "seed": ..., "size": ..., "target": "+-0.05 on top-1 at 95%"}.
    strata: the strata and quotas the draw used (`audit_sampling.quotas`).
    measures: name -> Estimate, e.g. the fields of `agreement.summarise`.
    verdicts: group key -> the auditor's verdict ("correct", "wrong", ...).
    error_categories: group key -> the error categories the auditor marked.
    Verdicts and categories come out as counts with their sorted group keys.
    """
    categories: dict[str, list[str]] = {}
    for group_key, names in error_categories.items():
        for name in names:
            categories.setdefault(name, []).append(group_key)
    by_verdict: dict[str, list[str]] = {}
    for group_key, verdict in verdicts.items():
        by_verdict.setdefault(verdict, []).append(group_key)
    report = {
        "format": FORMAT,
        "design": dict(design),
        "strata": [{"label": s.label, "low": s.low, "high": s.high, "population": s.population, "quota": s.quota}
                   for s in strata],
        "measures": {name: {"value": e.value, "interval": list(e.interval) if e.interval else None, "n": e.n}
                     for name, e in measures.items()},
        "verdicts": _counted(by_verdict),
        "error_categories": _counted(categories),
    }
    if generated_at is not None:
        report["generated_at"] = generated_at
    return report


def report_json(report: Mapping[str, object]) -> bytes:
    """Canonical JSON bytes of `report` (see the module's docstring). Raises ValueError on
    a value JSON cannot hold exactly: NaN, infinity, a key that is not a string, or an
    object other than dict, list, tuple, str, int, float, bool and None."""
    text = json.dumps(_canonical(report, "report"), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def _counted(groups: Mapping[str, list[str]]) -> dict:
    return {name: {"count": len(keys), "groups": sorted(keys)} for name, keys in groups.items()}


def _canonical(value: object, where: str) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if not isfinite(value):
            raise ValueError(f"{where}: {value} has no JSON form")
        return round(value, FLOAT_DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a string")
        return {key: _canonical(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{where}: {type(value).__name__} is not plain JSON data")
