from datetime import date

import pytest

from invoicekit import Invoice


@pytest.fixture
def invoice():
    inv = Invoice("INV-2024-017", "Globex Ltd", date(2024, 5, 2))
    inv.add_line("Consulting", 3, "150.00")
    inv.add_line("Printed manuals", 2, "12.50", tax="reduced")
    return inv
