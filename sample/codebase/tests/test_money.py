from decimal import Decimal

import pytest

from invoicekit.money import Money


def test_add_and_subtract():
    assert Money("1.10") + Money("2.25") == Money("3.35")
    assert Money("5.00") - Money("7.50") == Money("-2.50")


def test_currency_mismatch():
    with pytest.raises(ValueError, match="currency mismatch"):
        Money("1", "USD") + Money("1", "EUR")


def test_float_rejected():
    with pytest.raises(TypeError):
        Money(0.1)


def test_multiply_and_quantize():
    assert (Money("19.99") * 3).quantize() == Money("59.97")
    assert (Money("10.00") * Decimal("0.075")).quantize() == Money("0.75")
    assert Money("0.125").quantize() == Money("0.13")


def test_allocate_even():
    assert Money("90.00").allocate(3) == [Money("30.00")] * 3


def test_allocate_rejects_zero_parts():
    with pytest.raises(ValueError):
        Money("1.00").allocate(0)


def test_format():
    assert Money("1234.5").format() == "$1,234.50"
    assert Money("-3", "EUR").format() == "-€3.00"
    assert Money("12", "CHF").format() == "12.00 CHF"
