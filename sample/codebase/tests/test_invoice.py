from datetime import date

import pytest

from invoicekit import Invoice, Money


def test_subtotal_and_tax(invoice):
    assert invoice.subtotal() == Money("475.00")
    assert invoice.tax_lines() == {"standard": Money("85.50"), "reduced": Money("1.75")}
    assert invoice.total() == Money("562.25")


def test_fixed_discount(invoice):
    invoice.discount = "25.00"
    assert invoice.discount_amount() == Money("25.00")
    assert invoice.total() == Money("537.25")


def test_percent_discount(invoice):
    invoice.discount = "10%"
    assert invoice.discount_amount() == Money("47.50")
    assert invoice.total() == Money("514.75")


def test_line_currency_must_match(invoice):
    with pytest.raises(ValueError, match="differs from invoice"):
        invoice.add_line("Travel", 1, Money("80.00", "EUR"))


def test_quantity_must_be_positive(invoice):
    with pytest.raises(ValueError, match="quantity must be positive"):
        invoice.add_line("Refund", -1, "10.00")


def test_due_date_uses_terms():
    inv = Invoice("INV-9", "Initech", date(2024, 5, 2), terms="NET14")
    assert inv.due() == date(2024, 5, 16)
