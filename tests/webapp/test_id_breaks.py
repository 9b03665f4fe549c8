"""Ids wrap between their words: the filter escapes an id and lets a line break after its
separators, so a table need neither widen past the page nor cut the id mid-word."""

from webapp.templatetags.ids import id_breaks


def test_an_id_may_break_after_its_separators_and_nowhere_else():
    assert id_breaks("django__django-11099") == "django__<wbr>django-11099"
    assert id_breaks("org/repo.name:tag_") == "org/<wbr>repo.<wbr>name:<wbr>tag_"  # not after the last


def test_an_id_is_escaped():
    assert id_breaks('<img src=x onerror=alert(1)>"_x') == "&lt;img src=x onerror=alert(1)&gt;&quot;_<wbr>x"
    assert id_breaks(None) == ""
