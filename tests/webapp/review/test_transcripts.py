"""Transcripts: loaded on demand, paged, searchable, long parts cut with "show all"."""

import json

import pytest
from django.urls import reverse

from tests.webapp.reviewdata import import_batch, records
from webapp.html import transcripts
from webapp.models import Trajectory, Transcript

pytestmark = pytest.mark.django_db


@pytest.fixture
def trajectory(tmp_path):
    import_batch(tmp_path, records())
    return Trajectory.objects.get(trajectory_id="t1")


def _set_messages(trajectory, messages):
    Transcript.objects.filter(pk=trajectory.pk).update(messages=messages)


def test_partial_has_collapsible_turns_and_pretty_tool_arguments(client, researcher, trajectory):
    client.force_login(researcher)
    response = client.get(reverse("transcript", args=[trajectory.pk]), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html
    assert html.count('<details class="turn') == 5
    assert '<details class="turn role-assistant" open' in html
    assert '<details class="turn role-tool"' in html
    assert '{\n  &quot;command&quot;: &quot;cat pkg/mod.py&quot;\n}' in html
    assert "output of <span class=\"mono\">call_1</span>" in html


def test_without_javascript_it_is_a_page(client, researcher, trajectory):
    client.force_login(researcher)
    html = client.get(reverse("transcript", args=[trajectory.pk])).content.decode()
    assert "<html" in html and "Search this transcript" in html


def test_search_keeps_matching_turns_and_marks_them(client, researcher, trajectory):
    client.force_login(researcher)
    url = reverse("transcript", args=[trajectory.pk])
    response = client.get(url, {"q": "RETURNS"}, headers={"HX-Request": "true", "HX-Target": f"turns-{trajectory.pk}"})
    html = response.content.decode()
    assert "1 of 5 turns match" in html
    assert "f now <mark>returns</mark> x + 1" in html
    assert 'class="transcript"' not in html  # only the results are swapped


def test_a_long_transcript_is_paged(client, researcher, trajectory):
    _set_messages(trajectory, [{"role": "assistant", "content": f"step {i}"} for i in range(10_000)])
    client.force_login(researcher)
    url = reverse("transcript", args=[trajectory.pk])
    first = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert first.count('<details class="turn') == transcripts.TURNS_PER_PAGE
    assert f"?start={transcripts.TURNS_PER_PAGE}" in first
    nxt = client.get(url, {"start": 9_950}, headers={"HX-Request": "true"}).content.decode()
    assert "step 9999" in nxt and nxt.count('<details class="turn') == 50 and "?start=" not in nxt


def test_a_huge_output_is_cut_and_show_all_pages_through_it(client, researcher, trajectory):
    big = "".join(f"row {i} <b>\n" for i in range(2_000_000))  # ~26 MB
    _set_messages(trajectory, [{"role": "tool", "content": big}])
    client.force_login(researcher)
    html = client.get(reverse("transcript", args=[trajectory.pk]), headers={"HX-Request": "true"}).content.decode()
    assert len(html) < 50_000
    assert "row 39 &lt;b&gt;" in html and "row 40 " not in html
    part_url = reverse("transcript_part", args=[trajectory.pk, 0, 0])
    assert part_url in html and "Show all" in html
    chunk = client.get(part_url, headers={"HX-Request": "true"})
    body = chunk.content.decode()
    assert len(body) < 2 * transcripts.PART_CHUNK
    assert f"offset={transcripts.PART_CHUNK}" in body
    last = client.get(part_url, {"offset": len(big) - 10})
    assert "<html" in last.content.decode() and last.context["next_offset"] is None


def test_odd_messages_do_not_break_it(client, researcher, trajectory):
    _set_messages(trajectory, [
        "just a string", None, {"role": 7, "content": [{"type": "text", "text": "part"}, {"type": "image_url"}]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "x", "arguments": "not json {"}}, "bad"]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "y", "arguments": {"already": "a dict"}}}]},
    ])
    client.force_login(researcher)
    response = client.get(reverse("transcript", args=[trajectory.pk]), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "not json {" in html and "&quot;already&quot;: &quot;a dict&quot;" in html
    assert "image_url" in html


def test_missing_transcript_and_bad_parts(client, researcher, trajectory):
    Transcript.objects.filter(pk=trajectory.pk).delete()
    client.force_login(researcher)
    html = client.get(reverse("transcript", args=[trajectory.pk]), headers={"HX-Request": "true"}).content.decode()
    assert "no transcript" in html
    assert client.get(reverse("transcript_part", args=[trajectory.pk, 0, 0])).status_code == 404
    other = Trajectory.objects.get(trajectory_id="t2")
    assert client.get(reverse("transcript_part", args=[other.pk, 99, 0])).status_code == 404
    assert client.get(reverse("transcript_part", args=[other.pk, 0, 9])).status_code == 404


def test_tool_call_arguments_are_pretty_printed():
    assert transcripts.pretty_arguments('{"a":1,"b":[1,2]}') == json.dumps({"a": 1, "b": [1, 2]}, indent=2)
    assert transcripts.pretty_arguments("{broken") == "{broken"


def test_the_database_cuts_the_page_of_turns(trajectory):
    from webapp.review.selectors import transcript_slice

    messages = [{"role": "user", "content": "a\nb"}, None, True, False, "s", 3.5, [1, 2], {"x": "é\u202e"}]
    _set_messages(trajectory, messages)
    assert transcript_slice(trajectory.pk, 0, 100) == (8, messages)
    assert transcript_slice(trajectory.pk, 2, 5) == (8, [True, False, "s"])
    assert transcript_slice(trajectory.pk, 8, 20) == (8, [])
    _set_messages(trajectory, {"not": "a list"})
    assert transcript_slice(trajectory.pk, 0, 10) == (0, [])
    Transcript.objects.filter(pk=trajectory.pk).delete()
    assert transcript_slice(trajectory.pk, 0, 10) is None


def test_transcript_links_and_picks_only_where_there_is_a_transcript(client, researcher, tmp_path):
    from webapp.models import Group

    recs = records("task-t")
    for record in recs[2:]:
        del record["messages"]  # t3..t6 come without a transcript
    group = Group.objects.get(batch=import_batch(tmp_path, recs))
    with_one = {t.trajectory_id: t.pk for t in Trajectory.objects.filter(group=group)}
    client.force_login(researcher)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    linked = {tid for tid, pk in with_one.items() if f'href="{reverse("transcript", args=[pk])}"' in html}
    assert linked == {"t1", "t2"}
    assert html.count("No transcript</span>") == 4
    assert "4 of the 6 trajectories have no transcript in the data." in html
    for record in recs[:2]:
        Transcript.objects.filter(pk=with_one[record["trajectory_id"]]).delete()
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    assert 'id="transcripts"' not in html and "/transcript/" not in html


def test_multi_line_argument_values_read_as_code_between_triple_quotes():
    edit = {"command": "str_replace", "path": "pkg/mod.py", "edits": [{"new": "def f():\n    return x + 1"}]}
    assert transcripts.pretty_arguments(json.dumps(edit)) == (
        '{\n  "command": "str_replace",\n  "path": "pkg/mod.py",\n  "edits": [\n    {\n      "new": """\n'
        'def f():\n    return x + 1\n"""\n    }\n  ]\n}')


def test_an_agents_code_edit_shows_as_escaped_lines_of_code(client, researcher, trajectory):
    code = 'def f():\n    return "<script>alert(1)</script>"'
    _set_messages(trajectory, [{"role": "assistant", "tool_calls": [
        {"function": {"name": "edit", "arguments": json.dumps({"path": "m.py", "new_str": code})}}]}])
    client.force_login(researcher)
    html = client.get(reverse("transcript", args=[trajectory.pk]), headers={"HX-Request": "true"}).content.decode()
    assert ('&quot;new_str&quot;: &quot;&quot;&quot;\ndef f():\n    return &quot;&lt;script&gt;alert(1)&lt;/script&gt;'
            '&quot;\n&quot;&quot;&quot;\n}') in html
    assert "<script>alert" not in html and "\\n" not in html
