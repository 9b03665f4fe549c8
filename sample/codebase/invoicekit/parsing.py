"""Parsing money amounts and CSV line items."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from .money import CURRENCY_SYMBOLS, Money

if TYPE_CHECKING:
    from .invoice import Invoice

_SYMBOL_TO_CODE = {symbol: code for code, symbol in CURRENCY_SYMBOLS.items()}
_CODE_FIRST = re.compile(r"^([A-Z]{3})\s+(\S.*)$")
_CODE_LAST = re.compile(r"^(.*\S)\s+([A-Z]{3})$")

REQUIRED_COLUMNS = ("description", "quantity", "unit_price")


def parse_amount(text: str, default_currency: str = "USD") -> Money:
    """Parse "12.50", "$12.50", "-€3", "EUR 12.50" or "12.50 EUR" into Money."""
    value = text.strip()
    currency = default_currency
    sign = ""
    if value.startswith("-"):
        sign, value = "-", value[1:].lstrip()
    if value[:1] in _SYMBOL_TO_CODE:
        currency = _SYMBOL_TO_CODE[value[0]]
        value = value[1:].strip()
    elif match := _CODE_FIRST.match(value):
        currency, value = match.group(1), match.group(2)
    elif match := _CODE_LAST.match(value):
        value, currency = match.group(1), match.group(2)
    try:
        amount = Decimal(sign + value)
    except InvalidOperation:
        raise ValueError(f"not an amount: {text!r}") from None
    return Money(amount, currency)


def parse_csv_lines(text: str) -> list[dict[str, str]]:
    """Parse CSV text with a header row into one dict per line item."""
    rows = [row for row in text.splitlines() if row.strip()]
    if not rows:
        return []
    header = [name.strip().lower() for name in rows[0].split(",")]
    missing = [name for name in REQUIRED_COLUMNS if name not in header]
    if missing:
        raise ValueError(f"missing columns: {', '.join(missing)}")
    items = []
    for number, row in enumerate(rows[1:], start=2):
        cells = [cell.strip() for cell in row.split(",")]
        if len(cells) != len(header):
            raise ValueError(f"line {number}: expected {len(header)} fields, got {len(cells)}")
        items.append(dict(zip(header, cells, strict=True)))
    return items


def load_invoice_lines(invoice: Invoice, text: str) -> int:
    """Add the line items of a CSV text to `invoice`; returns how many were added."""
    items = parse_csv_lines(text)
    for item in items:
        price = parse_amount(item["unit_price"], invoice.currency)
        invoice.add_line(
            item["description"], item["quantity"], price, item.get("tax") or "standard"
        )
    return len(items)
