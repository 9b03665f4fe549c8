from datetime import date

import pytest

from invoicekit.dates import add_business_days, days_overdue, due_date, end_of_month


def test_end_of_month_leap_year():
    assert end_of_month(date(2024, 2, 10)) == date(2024, 2, 29)


def test_net_terms():
    assert due_date(date(2024, 5, 2), "NET30") == date(2024, 6, 1)
    assert due_date(date(2024, 5, 2), "net 14") == date(2024, 5, 16)


def test_immediate_terms():
    assert due_date(date(2024, 5, 2), "COD") == date(2024, 5, 2)


def test_eom_terms():
    assert due_date(date(2024, 1, 31), "EOM") == date(2024, 2, 29)
    assert due_date(date(2024, 6, 15), "EOM") == date(2024, 7, 31)


def test_unknown_terms():
    with pytest.raises(ValueError, match="unknown payment terms"):
        due_date(date(2024, 5, 2), "NET30X")


def test_add_business_days_skips_weekend():
    # Friday + 1 business day is the next Monday
    assert add_business_days(date(2024, 5, 3), 1) == date(2024, 5, 6)
    assert add_business_days(date(2024, 5, 1), 5) == date(2024, 5, 8)


def test_days_overdue():
    assert days_overdue(date(2024, 5, 2), date(2024, 5, 12)) == 10
    assert days_overdue(date(2024, 5, 2), date(2024, 4, 30)) == 0
