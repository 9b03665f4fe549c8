"""Tax rates and the tax due on amounts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .money import Money


@dataclass(frozen=True)
class TaxRate:
    name: str
    percent: Decimal

    def __post_init__(self) -> None:
        object.__setattr__(self, "percent", Decimal(self.percent))
        if not Decimal(0) <= self.percent <= Decimal(100):
            raise ValueError(f"tax percent out of range: {self.percent}")

    @property
    def factor(self) -> Decimal:
        return self.percent / Decimal(100)

    def tax_on(self, net: Money) -> Money:
        """Tax due on a net (tax-exclusive) amount, rounded to the cent."""
        return (net * self.factor).quantize()

    def split_gross(self, gross: Money) -> tuple[Money, Money]:
        """Split a tax-inclusive amount into (net, tax)."""
        net = Money(gross.amount / (1 + self.factor), gross.currency).quantize()
        return net, gross - net


STANDARD_RATES = {
    "none": TaxRate("none", Decimal("0")),
    "reduced": TaxRate("reduced", Decimal("7")),
    "standard": TaxRate("standard", Decimal("19")),
}


def get_rate(name: str) -> TaxRate:
    """Look up one of the standard rates by name (case-insensitive)."""
    try:
        return STANDARD_RATES[name.strip().lower()]
    except KeyError:
        raise KeyError(f"unknown tax rate: {name!r}") from None


def tax_by_rate(items: list[tuple[TaxRate, Money]]) -> dict[str, Money]:
    """Tax per rate name for (rate, net) pairs, each pair taxed and rounded on its own."""
    totals: dict[str, Money] = {}
    for rate, net in items:
        tax = rate.tax_on(net)
        if rate.name in totals:
            totals[rate.name] = totals[rate.name] + tax
        else:
            totals[rate.name] = tax
    return totals
