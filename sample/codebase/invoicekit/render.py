"""Rendering invoices as plain text and as an HTML fragment."""

from __future__ import annotations

from .invoice import Invoice

WIDTH = 52


def _row(label: str, value: str) -> str:
    return f"{label:<36}{value:>16}"


def render_text(invoice: Invoice) -> str:
    """A fixed-width text rendering, one line item per row."""
    out = [
        f"INVOICE {invoice.number}",
        f"Customer: {invoice.customer}",
        f"Issued:   {invoice.issued.isoformat()}",
        f"Due:      {invoice.due().isoformat()}",
        "-" * WIDTH,
    ]
    for line in invoice.lines:
        label = f"{line.description[:28]} x{line.quantity}"
        out.append(_row(label, line.net.format()))
    out.append("-" * WIDTH)
    out.append(_row("Subtotal", invoice.subtotal().format()))
    discount = invoice.discount_amount()
    if not discount.is_zero():
        out.append(_row("Discount", (-discount).format()))
    for name, tax in sorted(invoice.tax_lines().items()):
        out.append(_row(f"Tax ({name})", tax.format()))
    out.append(_row("Total", invoice.total().format()))
    return "\n".join(out) + "\n"


def render_html(invoice: Invoice) -> str:
    """An HTML fragment for embedding the invoice in a page or an email."""
    rows = "".join(
        f"<tr><td>{line.description}</td><td>{line.quantity}</td><td>{line.net.format()}</td></tr>"
        for line in invoice.lines
    )
    return (
        f'<div class="invoice" data-number="{invoice.number}">'
        f"<h1>Invoice {invoice.number}</h1>"
        f'<p class="customer">{invoice.customer}</p>'
        f"<table>{rows}</table>"
        f'<p class="total">Total: {invoice.total().format()}</p>'
        "</div>"
    )
