"""An audit's report: plain data in, the same JSON bytes out every time."""

import doctest
import json

import pytest

import grading.audit_report
from grading.agreement import Estimate, summarise
from grading.audit_report import FORMAT, build_report, report_json
from grading.audit_sampling import AuditCandidate, quotas


def test_doctests_run():
    assert doctest.testmod(grading.audit_report).failed == 0


def small_report(**extra):
    pool = [AuditCandidate(f"g{i}", {"margin": float(i)}) for i in range(6)]
    return build_report(
        design={"batch": "b1", "stratify_by": "margin", "seed": 7, "size": 4, "target": "+-0.05 on top-1 at 95%"},
        strata=quotas(pool, size=4, stratify_by="margin", bins=2),
        measures={"top1": Estimate(2 / 3, (0.25, 1.0), 3), "kendall_tau": Estimate(None, None, 0)},
        verdicts={"g4": "correct", "g0": "wrong", "g2": "correct"},
        error_categories={"g0": ["missed test", "style"], "g2": []},
        **extra,
    )


def test_the_report_counts_verdicts_and_categories_with_sorted_group_keys():
    report = small_report()
    assert report["format"] == FORMAT
    assert report["verdicts"] == {"correct": {"count": 2, "groups": ["g2", "g4"]},
                                  "wrong": {"count": 1, "groups": ["g0"]}}
    assert report["error_categories"] == {"missed test": {"count": 1, "groups": ["g0"]},
                                          "style": {"count": 1, "groups": ["g0"]}}
    assert report["strata"] == [{"label": "0 to 2", "low": 0.0, "high": 2.0, "population": 3, "quota": 2},
                                {"label": "3 to 5", "low": 3.0, "high": 5.0, "population": 3, "quota": 2}]
    assert report["measures"]["kendall_tau"] == {"value": None, "interval": None, "n": 0}
    assert "generated_at" not in report


def test_the_json_is_byte_for_byte_fixed():
    expected = (
        '{\n  "design": {\n    "batch": "b1",\n    "seed": 7,\n    "size": 4,\n    "stratify_by": "margin",\n'
        '    "target": "+-0.05 on top-1 at 95%"\n  },\n  "error_categories": {\n    "missed test": {\n'
        '      "count": 1,\n      "groups": [\n        "g0"\n      ]\n    },\n    "style": {\n      "count": 1,\n'
        '      "groups": [\n        "g0"\n      ]\n    }\n  },\n  "format": "gagar-audit-report/1",\n'
        '  "generated_at": "2025-01-02T03:04:05Z",\n  "measures": {\n    "kendall_tau": {\n      "interval": null,\n'
        '      "n": 0,\n      "value": null\n    },\n    "top1": {\n      "interval": [\n        0.25,\n        1.0\n'
        '      ],\n      "n": 3,\n      "value": 0.666667\n    }\n  },\n  "strata": [\n    {\n      "high": 2.0,\n'
        '      "label": "0 to 2",\n      "low": 0.0,\n      "population": 3,\n      "quota": 2\n    },\n    {\n'
        '      "high": 5.0,\n      "label": "3 to 5",\n      "low": 3.0,\n      "population": 3,\n      "quota": 2\n'
        '    }\n  ],\n  "verdicts": {\n    "correct": {\n      "count": 2,\n      "groups": [\n        "g2",\n'
        '        "g4"\n      ]\n    },\n    "wrong": {\n      "count": 1,\n      "groups": [\n        "g0"\n      ]\n'
        '    }\n  }\n}\n'
    )
    assert report_json(small_report(generated_at="2025-01-02T03:04:05Z")).decode() == expected


def test_the_same_audit_gives_the_same_bytes_whatever_the_order_of_its_inputs():
    pairs = [([["a"], ["b"], ["c"]], [["b"], ["a"], ["c"]]), ([["a"], ["b"]], [["a"], ["b"]])] * 5
    measures = vars(summarise(pairs, seed=1))
    first = report_json(build_report(design={"seed": 1}, strata=[], measures=measures,
                                     verdicts={"x": "ok", "y": "bad"}, error_categories={"y": ["a", "b"]}))
    second = report_json(build_report(design={"seed": 1}, strata=[], measures=dict(reversed(measures.items())),
                                      verdicts={"y": "bad", "x": "ok"}, error_categories={"y": ["b", "a"]}))
    assert first == second
    assert json.loads(first)["measures"]["spearman"]["n"] == 10


def test_floats_are_rounded_and_negative_zero_is_zero():
    assert report_json({"a": 0.1 + 0.2, "b": -1e-9, "c": 1 / 3}) == b'{\n  "a": 0.3,\n  "b": 0.0,\n  "c": 0.333333\n}\n'


def test_text_stays_readable_utf8():
    assert report_json({"note": "café <b>"}) == '{\n  "note": "café <b>"\n}\n'.encode()


@pytest.mark.parametrize(("report", "message"), [
    ({"x": float("nan")}, r"report.x: nan has no JSON form"),
    ({"x": [1.0, float("inf")]}, r"report.x\[1\]: inf has no JSON form"),
    ({"x": {1: "a"}}, "report.x: key 1 is not a string"),
    ({"x": {"a", "b"}}, "report.x: set is not plain JSON data"),
])
def test_values_json_cannot_hold_exactly_are_refused(report, message):
    with pytest.raises(ValueError, match=message):
        report_json(report)
