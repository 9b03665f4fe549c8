"""Invoices: line items, discount, tax and totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from .dates import due_date
from .money import Money
from .tax import TaxRate, get_rate, tax_by_rate


@dataclass
class LineItem:
    description: str
    quantity: Decimal
    unit_price: Money
    tax_rate: TaxRate

    def __post_init__(self) -> None:
        self.quantity = Decimal(self.quantity)
        if self.quantity <= 0:
            raise ValueError("quantity must be positive")

    @property
    def net(self) -> Money:
        return (self.unit_price * self.quantity).quantize()


@dataclass
class Invoice:
    number: str
    customer: str
    issued: date
    currency: str = "USD"
    terms: str = "NET30"
    discount: str | None = None
    lines: list[LineItem] = field(default_factory=list)

    def add_line(
        self,
        description: str,
        quantity: Decimal | int | str,
        unit_price: Money | str,
        tax: str = "standard",
    ) -> LineItem:
        if not isinstance(unit_price, Money):
            unit_price = Money(unit_price, self.currency)
        if unit_price.currency != self.currency:
            raise ValueError(
                f"line currency {unit_price.currency} differs from invoice {self.currency}"
            )
        item = LineItem(description, Decimal(quantity), unit_price, get_rate(tax))
        self.lines.append(item)
        return item

    def subtotal(self) -> Money:
        total = Money.zero(self.currency)
        for line in self.lines:
            total = total + line.net
        return total

    def discount_amount(self) -> Money:
        """The discount: a fixed amount such as "15.00" or a percentage such as "10%"."""
        if not self.discount:
            return Money.zero(self.currency)
        text = self.discount.strip()
        if text.endswith("%"):
            percent = Decimal(text[:-1])
            return (self.subtotal() * (percent / 100)).quantize()
        return Money(text, self.currency)

    def tax_lines(self) -> dict[str, Money]:
        return tax_by_rate([(line.tax_rate, line.net) for line in self.lines])

    def tax_total(self) -> Money:
        total = Money.zero(self.currency)
        for tax in self.tax_lines().values():
            total = total + tax
        return total

    def total(self) -> Money:
        return self.subtotal() - self.discount_amount() + self.tax_total()

    def due(self) -> date:
        return due_date(self.issued, self.terms)
