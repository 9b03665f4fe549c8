"""Calibration of a grader's confidence against human verdicts: reliability table and ECE."""

import random

import pytest

from grading.agreement import Bin, calibration


def calibration_reference(confidences, correct, bins):
    """Plain loops: bin b holds b/bins <= c < (b+1)/bins, the last bin also holds 1."""
    rows = []
    for b in range(bins):
        inside = [(c, ok) for c, ok in zip(confidences, correct, strict=True)
                  if b / bins <= c < (b + 1) / bins or (b == bins - 1 and c == 1.0)]
        rows.append((len(inside), sum(c for c, _ in inside) / len(inside) if inside else None,
                     sum(ok for _, ok in inside) / len(inside) if inside else None))
    ece = sum(n * abs(acc - conf) for n, conf, acc in rows if n) / len(confidences)
    return rows, ece


@pytest.mark.parametrize("seed", range(20))
def test_calibration_matches_a_loop_reference(seed):
    rng = random.Random(seed)
    bins = rng.choice([1, 3, 5, 10, 15])
    confidences = [rng.choice([rng.random(), round(rng.random(), 1), 0.0, 1.0]) for _ in range(rng.randint(1, 80))]
    correct = [rng.random() < c for c in confidences]
    got = calibration(confidences, correct, bins=bins)
    rows, ece = calibration_reference(confidences, correct, bins)
    assert [(r.n, r.mean_confidence, r.accuracy) for r in got.rows] == [
        (n, pytest.approx(conf) if n else None, pytest.approx(acc) if n else None) for n, conf, acc in rows]
    assert got.ece == pytest.approx(ece)


def test_reliability_table_and_ece_by_hand():
    got = calibration([0.1, 0.15, 0.9, 1.0], [False, True, True, True], bins=4)
    assert got.rows == [
        Bin(0.0, 0.25, 2, pytest.approx(0.125), 0.5),
        Bin(0.25, 0.5, 0, None, None),
        Bin(0.5, 0.75, 0, None, None),
        Bin(0.75, 1.0, 2, pytest.approx(0.95), 1.0),
    ]
    # half the judgements are off by 0.375, half by 0.05
    assert got.ece == pytest.approx((2 * 0.375 + 2 * 0.05) / 4)


def test_a_calibrated_grader_has_no_calibration_error():
    got = calibration([0.75] * 4 + [0.25] * 4, [True, True, True, False, True, False, False, False])
    assert got.ece == pytest.approx(0.0)


def test_a_confidence_on_an_edge_belongs_to_the_bin_it_starts():
    rows = calibration([0.3, 0.7], [True, True], bins=10).rows
    assert [(r.low, r.n) for r in rows if r.n] == [(0.3, 1), (0.7, 1)]


def test_no_judgements_give_an_empty_table_and_no_error():
    got = calibration([], [], bins=2)
    assert [r.n for r in got.rows] == [0, 0] and got.ece is None


def test_calibration_rejects_bad_input():
    with pytest.raises(ValueError, match="2 confidences but 1 verdicts"):
        calibration([0.1, 0.2], [True])
    with pytest.raises(ValueError, match=r"\[0, 1\], got 1.5"):
        calibration([0.1, 1.5], [True, False])
    with pytest.raises(ValueError, match="bins must be at least 1"):
        calibration([0.1], [True], bins=0)
