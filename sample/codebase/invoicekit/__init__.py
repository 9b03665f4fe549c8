"""invoicekit: invoices, money amounts, tax rates and payment terms."""

from .dates import add_business_days, due_date
from .invoice import Invoice, LineItem
from .money import Money
from .parsing import load_invoice_lines, parse_amount, parse_csv_lines
from .render import render_html, render_text
from .tax import TaxRate, get_rate

__version__ = "0.4.1"

__all__ = [
    "Invoice",
    "LineItem",
    "Money",
    "TaxRate",
    "add_business_days",
    "due_date",
    "get_rate",
    "load_invoice_lines",
    "parse_amount",
    "parse_csv_lines",
    "render_html",
    "render_text",
]
