"""Query parameters and URL numbers out of range: a 4xx or a clamp, never a 500.

The walk requests every named URL pattern (tests/webapp/urlwalk.py) as a
researcher, who may see and do everything, and records which parameters each
view reads from the query string or the form; then it sends each of those
parameters huge, negative and non-numeric values, and each number of the URL
itself past 32 and 64 bits. A view added later, or a parameter a view starts
reading, is checked without being listed here.
"""

import base64
import json
import re

import pytest
from django.http import QueryDict
from django.urls import reverse

from tests.webapp.urlwalk import marked_group, urls_of
from webapp.models import Trajectory
from webapp.params import QUERY_INT_MAX, query_int

pytestmark = pytest.mark.django_db

# past 32 bits (the issue's ?start=), past 64 bits either way, not a number, not a finite float
BAD_VALUES = ("2147483647", "9223372036854775808", "-9223372036854775809", "x", "1e400")
BAD_URL_NUMBERS = (2**31, 2**63, 10**30)
URL_NUMBER = re.compile(r"(?<=/)[0-9]+(?=/|$)")


@pytest.fixture
def walked(tmp_path, client, researcher):
    group, grading, item = marked_group(tmp_path, researcher)
    client.force_login(researcher)
    return group, urls_of(group, grading, item)


@pytest.fixture
def names_read(monkeypatch):
    """The names looked up in any QueryDict (request.GET and request.POST among them) since the last clear()."""
    names = set()
    get_item, contains, getlist = QueryDict.__getitem__, QueryDict.__contains__, QueryDict.getlist

    def record(method):
        def recorded(self, key, *args):
            names.add(key)
            return method(self, key, *args)
        return recorded

    monkeypatch.setattr(QueryDict, "__getitem__", record(get_item))
    monkeypatch.setattr(QueryDict, "__contains__", record(contains))
    monkeypatch.setattr(QueryDict, "getlist", record(getlist))
    return names


def _send(client, url, data=None):
    """GET, or POST where the URL only takes POST; the method used and the response."""
    response = client.get(url, data)
    if response.status_code == 405:
        return "POST", client.post(url, data or {})
    return "GET", response


def test_no_parameter_value_gives_a_server_error(client, walked, names_read):
    _, urls = walked
    checked = set()
    for name, url in urls.items():
        path, _, query = url.partition("?")
        base = QueryDict(query).dict()
        names_read.clear()
        _send(client, url)
        for param in sorted(names_read - {"csrfmiddlewaretoken"}):
            for value in BAD_VALUES:
                method, response = _send(client, path, {**base, param: value})
                assert response.status_code < 500, (method, name, param, value, response.status_code)
                checked.add((name, param))
    assert {("transcript", "start"), ("transcript_part", "offset"), ("patch_file", "start"),
            ("patch_file", "count"), ("interdiff", "a"), ("batch", "after"), ("batch", "before"),
            ("batch", "pass_min"), ("ranking_history", "b")} <= checked


def _with_number(path: str, position: int, number: int) -> str:
    found = list(URL_NUMBER.finditer(path))[position]
    return path[:found.start()] + str(number) + path[found.end():]


def test_no_number_in_a_url_gives_a_server_error(client, walked):
    checked = set()
    for name, url in walked[1].items():
        path = url.partition("?")[0]
        for position in range(len(URL_NUMBER.findall(path))):
            for huge in BAD_URL_NUMBERS:
                method, response = _send(client, _with_number(path, position, huge))
                assert 400 <= response.status_code < 500, (method, name, position, huge, response.status_code)
                checked.add((name, position))
    assert {("patch_raw", 0), ("transcript_part", 1), ("transcript_part", 2), ("grading_detail", 0),
            ("export_download", 0), ("ranking_save", 0)} <= checked


def test_a_transcript_page_far_past_the_end_is_empty(client, walked):
    group, _ = walked
    trajectory = Trajectory.objects.filter(group=group).first()
    url = reverse("transcript", args=[trajectory.pk])
    for start in ("2147483647", "9223372036854775808"):
        response = client.get(url, {"start": start}, headers={"HX-Request": "true"})
        assert response.status_code == 200
        assert response.context["start"] == QUERY_INT_MAX and not response.context["page"].turns


def _cursor(value, pk):
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode().rstrip("=")


@pytest.mark.parametrize("sort", ["group", "-group", "pass_rate", "-pass_rate"])
def test_a_forged_batch_page_cursor_is_answered(client, walked, sort):
    group, _ = walked
    url = reverse("batch", args=[group.batch_id])
    cursors = [_cursor(value, pk) for value in (2**63, -(2**63) - 1, 10**30, 1e308, "task-1")
               for pk in (2**63, -(2**63) - 1, 10**30, 1)]
    cursors += [base64.urlsafe_b64encode(b'[Infinity, 1]').decode(), base64.urlsafe_b64encode(b'[NaN, 1]').decode()]
    for cursor in cursors:
        for direction in ("after", "before"):
            response = client.get(url, {"sort": sort, direction: cursor})
            assert response.status_code == 200, (sort, direction, base64.urlsafe_b64decode(cursor + "=="))


@pytest.mark.parametrize("direction", ["after", "before"])
def test_a_forged_cursor_is_dropped_and_a_well_formed_one_honoured(client, walked, direction):
    """What keeps the test above from passing by ignoring every cursor: a well-formed one moves
    the page past the group, a forged one (out of the id column's range) gives the first page."""
    group, _ = walked
    url = reverse("batch", args=[group.batch_id])
    first = client.get(url).content.decode()
    assert group.group_id in first
    past = client.get(url, {direction: _cursor(group.group_id, group.pk)}).content.decode()
    assert f">{group.group_id}<" not in past
    forged = client.get(url, {direction: _cursor(group.group_id, 2**63)}).content.decode()
    assert f">{group.group_id}<" in forged


def test_query_int_clamps_into_range_and_falls_back_on_non_numbers():
    assert query_int("12") == 12
    assert query_int("-5") == 0
    assert query_int("9" * 30) == QUERY_INT_MAX
    assert query_int("x", 7) == 7 and query_int(None, 7) == 7 and query_int("1" * 5000, 7) == 7
