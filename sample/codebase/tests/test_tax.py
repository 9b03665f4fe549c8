from decimal import Decimal

import pytest

from invoicekit.money import Money
from invoicekit.tax import TaxRate, get_rate, tax_by_rate


def test_tax_on():
    assert get_rate("standard").tax_on(Money("100.00")) == Money("19.00")
    assert get_rate("Reduced").tax_on(Money("10.00")) == Money("0.70")


def test_split_gross():
    net, tax = get_rate("standard").split_gross(Money("119.00"))
    assert (net, tax) == (Money("100.00"), Money("19.00"))


def test_rate_out_of_range():
    with pytest.raises(ValueError):
        TaxRate("bogus", Decimal("120"))


def test_unknown_rate():
    with pytest.raises(KeyError, match="unknown tax rate"):
        get_rate("luxury")


def test_tax_by_rate_groups_by_name():
    standard, reduced = get_rate("standard"), get_rate("reduced")
    totals = tax_by_rate(
        [(standard, Money("100.00")), (reduced, Money("10.00")), (standard, Money("50.00"))]
    )
    assert totals == {"standard": Money("28.50"), "reduced": Money("0.70")}
