"""Money values: a decimal amount in one currency."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}

CENT = Decimal("0.01")


def to_decimal(value: Decimal | int | str) -> Decimal:
    """Convert to Decimal, refusing floats (they cannot hold cents exactly)."""
    if isinstance(value, float):
        raise TypeError("use str or Decimal for money amounts, not float")
    return Decimal(value)


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str = "USD"

    def __post_init__(self) -> None:
        object.__setattr__(self, "amount", to_decimal(self.amount))
        object.__setattr__(self, "currency", self.currency.upper())

    @classmethod
    def zero(cls, currency: str = "USD") -> Money:
        return cls(Decimal("0"), currency)

    def _check(self, other: object) -> None:
        if not isinstance(other, Money):
            raise TypeError(f"expected Money, got {type(other).__name__}")
        if other.currency != self.currency:
            raise ValueError(f"currency mismatch: {self.currency} != {other.currency}")

    def __add__(self, other: Money) -> Money:
        self._check(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._check(other)
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor: Decimal | int) -> Money:
        return Money(self.amount * to_decimal(factor), self.currency)

    __rmul__ = __mul__

    def __neg__(self) -> Money:
        return Money(-self.amount, self.currency)

    def __lt__(self, other: Money) -> bool:
        self._check(other)
        return self.amount < other.amount

    def is_zero(self) -> bool:
        return self.amount == 0

    def quantize(self) -> Money:
        """Round half up to the currency's minor unit."""
        return Money(self.amount.quantize(CENT, rounding=ROUND_HALF_UP), self.currency)

    def allocate(self, parts: int) -> list[Money]:
        """Split into `parts` amounts of whole cents that add up to this amount."""
        if parts < 1:
            raise ValueError("parts must be at least 1")
        share = (self.amount / parts).quantize(CENT, rounding=ROUND_DOWN)
        return [Money(share, self.currency) for _ in range(parts)]

    def format(self) -> str:
        """Format for display: "$1,234.50", "-€3.00", or "12.00 CHF"."""
        value = self.quantize().amount
        text = f"{abs(value):,.2f}"
        sign = "-" if value < 0 else ""
        symbol = CURRENCY_SYMBOLS.get(self.currency)
        if symbol:
            return f"{sign}{symbol}{text}"
        return f"{sign}{text} {self.currency}"

    def __str__(self) -> str:
        return self.format()
