from datetime import date

import pytest

from invoicekit import Invoice, Money
from invoicekit.parsing import load_invoice_lines, parse_amount, parse_csv_lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.50", Money("12.50")),
        ("$12.50", Money("12.50", "USD")),
        ("-€3", Money("-3", "EUR")),
        ("EUR 12.50", Money("12.50", "EUR")),
        ("12.50 GBP", Money("12.50", "GBP")),
    ],
)
def test_parse_amount(text, expected):
    assert parse_amount(text) == expected


def test_parse_amount_rejects_garbage():
    with pytest.raises(ValueError, match="not an amount"):
        parse_amount("twelve dollars")


def test_parse_csv_lines():
    text = "description,quantity,unit_price\nConsulting,3,150.00\n\nManuals,2,12.50\n"
    assert parse_csv_lines(text) == [
        {"description": "Consulting", "quantity": "3", "unit_price": "150.00"},
        {"description": "Manuals", "quantity": "2", "unit_price": "12.50"},
    ]


def test_parse_csv_missing_column():
    with pytest.raises(ValueError, match="missing columns: unit_price"):
        parse_csv_lines("description,quantity\nConsulting,3\n")


def test_parse_csv_wrong_field_count():
    with pytest.raises(ValueError, match="line 3: expected 3 fields, got 2"):
        parse_csv_lines("description,quantity,unit_price\nA,1,2.00\nB,1\n")


def test_load_invoice_lines():
    inv = Invoice("INV-3", "Umbrella", date(2024, 5, 2), currency="EUR")
    added = load_invoice_lines(inv, "description,quantity,unit_price,tax\nBooks,2,€9.50,reduced\n")
    assert added == 1
    assert inv.lines[0].net == Money("19.00", "EUR")
    assert inv.lines[0].tax_rate.name == "reduced"
