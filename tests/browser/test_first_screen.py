"""The group page opens on the code (issue 33): at 1280×800 and 1440×900 a realistic group (13
candidates, a 40-line statement, a ranking card, the grader's rationales) shows its matrix's
first file row in the first screen, in narrow wrapped columns unless the address chooses
otherwise, and a file row's short cells are not stretched to its longest one."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, ready, screenshot
from tests.django_fixtures import PASSWORD, make_user
from tests.factories import rollout
from tests.webapp.annotationdata import grade, save
from tests.webapp.reviewdata import file_patch, import_batch
from webapp.models import Group
from webapp.roles import RESEARCHER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = [(1280, 800), (1440, 900)]
GROUP = "django__django-11099"
LONG_LINE = "        raise ValidationError(" + ", ".join(f"'message_{i}'" for i in range(30)) + ")  # END-OF-LINE"
STATEMENT = "\n".join(
    [f"Line {i} of the issue: UsernameValidator allows a trailing newline in usernames, because $ matches"
     " before a final newline." for i in range(1, 37)] + ["", "LAST-LINE-OF-THE-STATEMENT", "", "Thanks."])


def tid(i: int) -> str:
    return f"sweagent__claude-3-5-sonnet-20241022__run-{i:02d}"


def patch(i: int) -> str:
    """run-01..06 one short fix, 07..09 the fix and a 55-line new test file, 10..13 a long line."""
    added = ["    regex = r'^[\\w.@+-]+\\Z'"] + ([LONG_LINE] if i >= 10 else [])
    out = file_patch("django/contrib/auth/validators.py", added, ["    regex = r'^[\\w.@+-]+$'"], start=10)
    if 7 <= i <= 9:
        out += file_patch("tests/auth_tests/test_validators.py",
                          [f"    def test_case_{n}(self):  # a long test file" for n in range(55)], new=True)
    if i in (3, 10):
        out += file_patch("docs/releases/3.0.txt", ["* The username validators reject a trailing newline."],
                          start=40)
    return out


@pytest.fixture
def group(tmp_path):
    """13 trajectories (11 pass), a 40-line statement, graded with a rationale for each passing one,
    and ranked by a researcher: the ranking card shows the editor and its table of advantages."""
    records = [rollout(GROUP, tid(i), 1.0 if i <= 11 else 0.0, patch=patch(i),
                       metrics={"num_turns": 20 + i, "output_tokens": 9000 + i}) for i in range(1, 14)]
    records[0]["task"] = {"id": GROUP, "statement": STATEMENT, "repo": "django/django", "base_commit": "d" * 40}
    group = Group.objects.get(batch=import_batch(tmp_path, records, name="swe-bench-verified/sweagent"))
    rita = make_user("rita", RESEARCHER)
    rationale = ("Replaces $ with \\Z in both validators, the minimal fix the issue asks for; the tests it adds "
                 "cover the trailing newline and nothing else changes.")
    grade(group, tiers=[[tid(i) for i in range(1, 7)], [tid(7), tid(8), tid(9)], [tid(10)], [tid(11)]],
          flags={tid(7): ["out_of_scope_changes"], tid(10): ["debug_leftovers"]},
          rationales={tid(i): rationale for i in range(1, 12)})
    save(group, rita, [[tid(7)], [tid(i) for i in range(1, 7)], [tid(8), tid(9), tid(10), tid(11)]])
    return group


@pytest.fixture
def rita_page(page, live_server, group):
    login(page, live_server, "rita", PASSWORD)
    return page


def open_group(page, live_server, group, width, height, query=""):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/groups/{group.pk}/{query}")
    ready(page)


def top_of(page, selector: str) -> float:
    return page.locator(selector).first.evaluate("e => e.getBoundingClientRect().top")


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_the_first_file_row_is_in_the_first_screen(rita_page, live_server, group, width, height):
    page = rita_page
    open_group(page, live_server, group, width, height)
    row = top_of(page, "#group-view tr.file-row")
    assert row + 40 <= height, row  # its name and the first lines of its cells, not just a border
    # what moved out of the way is still there
    expect(page.locator("#ranking")).to_have_count(1)
    expect(page.locator(".statement-text")).to_contain_text("LAST-LINE-OF-THE-STATEMENT", use_inner_text=False)
    screenshot(page, f"first-screen-{width}")
    folded = page.locator(".statement-text").evaluate("e => e.clientHeight")
    page.click("#statement-more summary")
    expect(page.locator("#statement-more summary")).to_have_text("Show less", use_inner_text=True)
    assert page.locator(".statement-text").evaluate("e => e.clientHeight") > 4 * folded
    assert not page.watch.errors


def column_width(page) -> float:
    return page.locator("#group-view tr.m-ids th.col").first.evaluate("e => e.getBoundingClientRect().width")


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_without_a_density_a_narrow_window_gets_narrow_wrapped_columns(rita_page, live_server, group, width,
                                                                         height):
    page = rita_page
    open_group(page, live_server, group, width, height)
    assert column_width(page) < 220  # narrow: 210 px
    cut = page.evaluate("""() => [...document.querySelectorAll('#group-view pre.code')]
        .filter(pre => pre.scrollWidth > pre.clientWidth + 1).length""")
    assert cut == 0
    # the toggle shown says so, and takes the reader to wide columns
    expect(page.locator("#toggle-narrow")).to_be_hidden()
    expect(page.locator("#toggle-narrow-auto")).to_have_attribute("aria-pressed", "true")
    page.click("#toggle-narrow-auto")
    page.wait_for_url("**density=wide**")
    ready(page)
    assert column_width(page) > 450  # a choice in the address holds at any width
    expect(page.locator("#toggle-narrow")).to_have_attribute("aria-pressed", "false")
    assert not page.watch.errors


def test_a_wide_window_keeps_wide_columns_by_default(rita_page, live_server, group):
    page = rita_page
    open_group(page, live_server, group, 1920, 1080)
    assert column_width(page) > 450
    expect(page.locator("#toggle-narrow-auto")).to_be_hidden()
    expect(page.locator("#toggle-narrow")).to_have_attribute("aria-pressed", "false")
    assert not page.watch.errors


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_a_long_file_leaves_no_tall_empty_boxes_beside_it(rita_page, live_server, group, width, height):
    page = rita_page
    open_group(page, live_server, group, width, height)
    row = page.locator("tr.file-row", has_text="tests/auth_tests/test_validators.py")
    # three of the thirteen columns add the 55-line file: the other ten cells are blank
    cells = row.locator("td.col").evaluate_all("cells => cells.map(c => c.getBoundingClientRect().height)")
    assert len(cells) == 13 and max(cells) <= 0.6 * height, cells
    long_cell = row.locator("td.col", has=page.locator(".cell-body")).first
    expect(long_cell.locator(".cap-toggle")).to_have_text("Show all")
    last = long_cell.locator(".ln", has_text="test_case_54")
    hidden_below = "e => e.getBoundingClientRect().top > e.closest('.cell-body').getBoundingClientRect().bottom"
    assert last.evaluate(hidden_below)
    long_cell.locator(".cap-toggle").click()
    expect(long_cell.locator(".cap-toggle")).to_have_text("Show less")
    assert not last.evaluate(hidden_below)  # all of it, once asked for
    screenshot(page, f"first-screen-capped-{width}")
    assert not page.watch.errors
