from invoicekit.render import render_html, render_text


def test_render_text(invoice):
    text = render_text(invoice)
    assert text.startswith("INVOICE INV-2024-017\nCustomer: Globex Ltd\n")
    assert "Due:      2024-06-01" in text
    assert "Tax (reduced)" in text and "$1.75" in text
    assert text.rstrip().endswith("$562.25")


def test_render_text_shows_discount(invoice):
    invoice.discount = "10%"
    assert "-$47.50" in render_text(invoice)


def test_render_html(invoice):
    html = render_html(invoice)
    assert html.startswith('<div class="invoice" data-number="INV-2024-017">')
    assert "<td>Consulting</td><td>3</td><td>$450.00</td>" in html
    assert '<p class="total">Total: $562.25</p>' in html
