"""Filters for showing untrusted values and numbers on the review pages."""

import math

from django import template
from django.utils.safestring import mark_safe

from webapp.html import patches
from webapp.html.text import escape
from webapp.roles import nav_links, user_roles

register = template.Library()


@register.filter
def reveal(value):
    """Escape `value` and show invisible direction controls (U+202E, ...) as marks."""
    return mark_safe(escape("" if value is None else str(value)))


@register.filter
def signed(value, digits=3):
    """+0.512 / −0.512 / — for missing values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:+.{int(digits)}f}".replace("-", "−")


@register.filter
def compact(value):
    """12034 -> 12.0k; non-numbers pass through."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else value
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:g}" if isinstance(value, float) else str(value)


@register.filter
def kib(value):
    return f"{value / 1024:.0f} KB" if value >= 1024 else f"{value} chars"


@register.filter
def percent(value):
    return f"{100 * value:.0f}%"


@register.simple_tag(takes_context=True)
def roles(context):
    return ", ".join(sorted(user_roles(context["request"].user))) or "no role"


@register.simple_tag(takes_context=True, name="nav_links")
def top_links(context):
    """The top bar's links the user may open (webapp.roles.NAV)."""
    return nav_links(context["request"].user)


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def sub(value, other):
    try:
        return int(value) - int(other)
    except (TypeError, ValueError):
        return ""


@register.filter
def absolute(value):
    return abs(value) if isinstance(value, int | float) else value


@register.filter
def interdiff_hunks(found):
    """A file of an interdiff (grading.interdiff.FileInterdiff) as highlighted hunks."""
    return mark_safe(patches.hunks_html(found.path, found.hunks))


INTERDIFF_STATUS = {"only_a": "only in A", "only_b": "only in B", "same": "same change", "differs": "differs",
                    "unreconciled": "cannot be compared"}


@register.filter
def interdiff_status(status):
    return INTERDIFF_STATUS.get(status, status)
