"""Task statements read as written: plain text unless clearly Markdown, with a toggle."""

import html as html_module
import re

import pytest
from django.urls import reverse

from tests.webapp.reviewdata import import_batch, records
from webapp.html.markdown import looks_like_markdown
from webapp.models import Group

# A Trac ticket as SWE-bench has them: tab indents, an identifier with underscores,
# a traceback with "# Out:" lines, and line breaks that carry meaning.
TRAC = ("Saving fails for __init__.py modules\nDescription\n\t\n"
        "With *args passed, models/__init__.py is skipped:\n"
        "Traceback (most recent call last):\n"
        '  File "django/db/models/base.py", line 12, in save\n'
        "\tself._save_table(raw=True)\n"
        "# Out: b'\\x00\\x01'\n"
        "# Out: b'done'\n"
        "1) run migrate\n2) run it again\n")
GITHUB = "### Bug\n\n`parse()` drops the last field:\n\n```python\n>>> parse('a,b,')\n['a', 'b']\n```\n"


@pytest.mark.parametrize("text", [
    GITHUB,
    "Steps:\n\n- import the file\n- open the batch\n",
    "* one\n* two\n",
    "1. install\n2. run\n",
    "~~~~\ncode\n~~~~\n",
    "```\r\nwindows line ends\r\n```\r\n",
])
def test_fenced_code_and_lists_are_markdown(text):
    assert looks_like_markdown(text)


@pytest.mark.parametrize("text", [
    TRAC,
    "## heading alone, with __init__ and `inline code`\n**bold**",
    "a diff in a report:\n- old value\n+ new value\n",
    "an unclosed fence:\n```python\nx = 1\n",
    "fences that do not match:\n```\ncode\n~~~\n",
    "",
])
def test_plain_text_is_not_markdown(text):
    assert not looks_like_markdown(text)


@pytest.mark.django_db
def test_a_plain_text_statement_is_shown_exactly_as_written(client, researcher, tmp_path):
    import_batch(tmp_path, records("trac", statement=TRAC), name="trac")
    client.force_login(researcher)

    html = client.get(reverse("group", args=[Group.objects.get(group_id="trac").pk])).content.decode()

    shown = re.search(r'<pre class="statement-text" hx-disable>(.*?)</pre>', html, re.S).group(1)
    assert html_module.unescape(shown) == TRAC and "<" not in shown
    assert re.search(r'id="statement-as-written" checked>', html)
    assert not re.search(r'id="statement-as-markdown" checked>', html)
    # the other reading is one click away, as Markdown would have it
    assert "<h1>Out: b'\\x00\\x01'</h1>" in html and "<strong>init</strong>" in html


@pytest.mark.django_db
def test_a_markdown_statement_is_shown_as_markdown_first(client, researcher, tmp_path):
    import_batch(tmp_path, records("gh", statement=GITHUB), name="gh")
    client.force_login(researcher)

    html = client.get(reverse("group", args=[Group.objects.get(group_id="gh").pk])).content.decode()

    assert re.search(r'id="statement-as-markdown" checked>', html)
    assert "<pre><code>&gt;&gt;&gt; parse('a,b,')" in html
    assert "<h3>Bug</h3>" in html


@pytest.mark.django_db
def test_a_group_without_a_statement_says_so(client, researcher, tmp_path):
    recs = records("none")
    recs[0].pop("task")
    import_batch(tmp_path, recs, name="none")
    client.force_login(researcher)

    html = client.get(reverse("group", args=[Group.objects.get(group_id="none").pk])).content.decode()

    assert "No statement in the data." in html and "statement-as-written" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("statement, folds", [
    ("\n".join(f"line {i}" for i in range(1, 41)), True),
    ("one long paragraph of an issue " * 12, True),
    ("Fix it.\nThe validator allows a trailing newline.", False),
])
def test_a_long_statement_folds_to_its_first_lines_with_a_toggle(client, researcher, tmp_path, statement, folds):
    import_batch(tmp_path, records("long", statement=statement), name="long")
    client.force_login(researcher)

    html = client.get(reverse("group", args=[Group.objects.get(group_id="long").pk])).content.decode()

    # the fold is CSS keyed on this closed <details>: without it nothing is cut
    assert ('<details class="statement-more" id="statement-more"><summary>'
            '<span class="when-closed">Show the whole statement</span>' in html) == folds
    assert html_module.unescape(re.search(r'<pre class="statement-text" hx-disable>(.*?)</pre>', html,
                                          re.S).group(1)) == statement  # all of it is on the page
