"""Blind review holds on every page: a walk over every URL pattern of the app.

A blind annotator who has not ranked a group must not see the grader's rank,
rationale, scores, confidence, flags or conversation anywhere: page, fragment
or form answer. The walk requests every named URL pattern (GET, and POST with
an empty form), so a page added later is checked without being listed here.
"""

import pytest
from django.urls import reverse

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import grade, review_batch, set_policy
from tests.webapp.urlwalk import url_patterns
from webapp.audit.sampling import Source, audit_plan
from webapp.audit.services import audit_set_create
from webapp.models import Export, GradingTranscript, Group, Trajectory
from webapp.roles import AUDITOR

pytestmark = pytest.mark.django_db

SECRETS = (
    "GRADER-RATIONALE-SECRET",  # a rationale
    "GRADER-VERSION-SECRET",  # the grading's version, shown beside the grader's ranking
    "GRADER-TRANSCRIPT-SECRET",  # what the grader did
    "918273", "0.918",  # a score
    "876543", "0.877",  # the confidence
)
# Markup that only ever holds the grader's verdict.
GRADER_MARKUP = ('class="grade"', "grade-rank", "grader #", '<span class="badge flag">', 'data-grader="[',
                 'id="grading-detail"')


@pytest.fixture
def hidden(tmp_path):
    """A group of a blind batch whose grading carries a marker in every part the grader wrote."""
    group = Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")
    set_policy(group.batch, blind=True)
    grading = grade(group, confidence=0.876543, flags={"t4": ["unnecessary_complexity"]},
                    rationales={"t1": "GRADER-RATIONALE-SECRET"})
    grading.scores = {"t1": 0.918273, "t2": 0.5, "t3": 0.5, "t4": 0.25, "t5": 0.125}
    grading.grader_version = "GRADER-VERSION-SECRET"
    grading.save()
    GradingTranscript.objects.create(grading=grading, messages=[
        {"run": 0, "turn": 1, "role": "assistant", "content": "GRADER-TRANSCRIPT-SECRET"}])
    return group, grading


def urls_of(group, grading):
    """Every named URL pattern filled in for `group`; a pattern this cannot fill fails the test."""
    trajectory = Trajectory.objects.get(group=group, trajectory_id="t1")
    other = Trajectory.objects.get(group=group, trajectory_id="t2")
    path = trajectory.patch.split("\n", 1)[0].split(" b/", 1)[1]
    queries = {"interdiff": f"?a={trajectory.pk}&b={other.pk}", "patch_file": f"?path={path}"}
    export = Export.objects.create(batch=group.batch, kind="advantages", format="parquet")
    plan = audit_plan(source=Source(batch=group.batch), stratify_by=None, bins=4, seed=0, size=1, half_width=None,
                      confidence=0.95)
    audit_set = audit_set_create(name="blind walk", plan=plan, user=make_user("walker", AUDITOR))
    item = audit_set.items.get()
    by_prefix = {"batches": group.batch_id, "groups": group.pk, "trajectories": trajectory.pk,
                 "gradings": grading.pk, "exports": export.pk, "audit/sets": audit_set.pk, "audit/items": item.pk}
    urls = {}
    for name, route in url_patterns():
        kwargs = {}
        if "<int:pk>" in route:
            prefix = max((p for p in by_prefix if route.startswith(f"{p}/")), key=len, default=route.split("/")[0])
            assert prefix in by_prefix, f"the blind-review walk cannot fill {route!r}: teach it {prefix}/"
            kwargs["pk"] = by_prefix[prefix]
        kwargs.update({key: 0 for key in ("index", "part") if f"<int:{key}>" in route})
        kwargs.update({"name": "manifest.json"} if "<str:name>" in route else {})
        kwargs.update({"table": "agreement"} if "<slug:table>" in route else {})
        urls[name] = reverse(name, kwargs=kwargs) + queries.get(name, "")
    return urls


def leaks(html: str) -> list[str]:
    return [marker for marker in SECRETS + GRADER_MARKUP if marker in html]


def test_a_blind_annotator_sees_nothing_of_the_grader_on_any_page(client, annotator, hidden):
    group, grading = hidden
    client.force_login(annotator)
    urls = urls_of(group, grading)
    assert {"group", "ranking_history", "grading_detail", "grading_panel", "batch"} <= set(urls)
    seen = {}
    for name, url in urls.items():
        for method in (client.get, client.post):
            response = method(url, headers={"HX-Request": "true"} if method is client.get else {})
            html = response.content.decode(errors="replace")
            assert not leaks(html), f"{method.__name__.upper()} {url} ({name}) shows {leaks(html)}"
            seen[(name, method.__name__)] = response.status_code
            assert response.status_code != 404, f"{url} ({name}) is not filled in right: nothing was checked"
            full = client.get(url) if method is client.get else None
            if full is not None:
                assert not leaks(full.content.decode(errors="replace")), f"GET {url} ({name}) shows the grader"
    assert seen[("group", "get")] == 200 and seen[("grading_detail", "get")] == 403


def test_the_same_walk_shows_the_grader_to_a_researcher(client, researcher, hidden):
    group, grading = hidden
    client.force_login(researcher)
    urls = urls_of(group, grading)
    shown = {marker for name in ("group", "ranking_history", "grading_detail")
             for marker in leaks(client.get(urls[name]).content.decode())}
    assert {"GRADER-RATIONALE-SECRET", "GRADER-VERSION-SECRET", "GRADER-TRANSCRIPT-SECRET", "grader #",
            'class="grade"'} <= shown


def test_once_the_annotator_ranks_the_group_the_grader_is_shown(client, annotator, hidden):
    group, grading = hidden
    from tests.webapp.annotationdata import save

    save(group, annotator, [["t1"], ["t2"], ["t3"], ["t4"], ["t5"]])
    client.force_login(annotator)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "GRADER-RATIONALE-SECRET" in html
    assert client.get(reverse("grading_detail", args=[grading.pk])).status_code == 200
