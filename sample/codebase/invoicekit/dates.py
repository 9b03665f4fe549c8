"""Payment terms and due dates."""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

_NET_RE = re.compile(r"^NET\s*(\d{1,3})$")

IMMEDIATE_TERMS = ("COD", "DUE_ON_RECEIPT")


def end_of_month(day: date) -> date:
    """The last day of the month that `day` falls in."""
    last = calendar.monthrange(day.year, day.month)[1]
    return day.replace(day=last)


def due_date(issued: date, terms: str) -> date:
    """Due date of an invoice issued on `issued` under payment `terms`.

    Supported terms: "NET<n>" (n days after issue), "EOM" (the last day of
    the month after the month of issue), "COD" and "DUE_ON_RECEIPT".
    """
    code = terms.strip().upper()
    if code in IMMEDIATE_TERMS:
        return issued
    match = _NET_RE.match(code)
    if match:
        return issued + timedelta(days=int(match.group(1)))
    if code == "EOM":
        first_of_next = date(issued.year, issued.month + 1, 1)
        return end_of_month(first_of_next)
    raise ValueError(f"unknown payment terms: {terms!r}")


def is_business_day(day: date) -> bool:
    return day.weekday() < 5


def add_business_days(day: date, days: int) -> date:
    """The date `days` business days (Monday to Friday) after `day`."""
    current = day
    added = 0
    while added < days:
        current += timedelta(days=1)
        if is_business_day(current):
            added += 1
    return current


def days_overdue(due: date, today: date) -> int:
    """Whole days past the due date, 0 if not yet due."""
    return max(0, (today - due).days)
