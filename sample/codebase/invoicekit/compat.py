"""Deprecated names kept for code written against invoicekit 0.3.

Import them from here only while migrating; they will be removed in invoicekit 0.5.
"""

from __future__ import annotations

import warnings
from datetime import date

from .dates import due_date
from .money import Money
from .parsing import parse_amount


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"invoicekit.compat.{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3
    )


def money_from_string(text: str, currency: str = "USD") -> Money:
    """Deprecated: use `invoicekit.parse_amount`."""
    _deprecated("money_from_string", "invoicekit.parse_amount")
    return parse_amount(text, currency)


def compute_due_date(issued: date, terms: str = "NET30") -> date:
    """Deprecated: use `invoicekit.due_date`."""
    _deprecated("compute_due_date", "invoicekit.due_date")
    return due_date(issued, terms)
