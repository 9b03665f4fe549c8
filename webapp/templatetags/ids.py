"""Ids that wrap between their words: `{{ tid|id_breaks }}` escapes the id and lets a line break
after a run of `_`, `/`, `.` or `:` (a hyphen allows one already). Without it a long id either
widens its table past the page or, with `overflow-wrap: anywhere`, breaks mid-word."""

import re

from django import template
from django.utils.safestring import mark_safe

from webapp.html.text import escape

register = template.Library()

SEPARATORS = re.compile(r"([_/.:]+)(?=[^_/.:])")


@register.filter
def id_breaks(value):
    """`value` escaped as `reveal` escapes it (direction controls shown, not applied), with a
    <wbr> after each run of separators but a trailing one (the marks hold none).

    >>> str(id_breaks("sweagent__claude-3-5<x>/run.01"))
    'sweagent__<wbr>claude-3-5&lt;x&gt;/<wbr>run.<wbr>01'
    """
    return mark_safe(SEPARATORS.sub(r"\1<wbr>", escape("" if value is None else str(value))))  # noqa: S308 - escaped
