"""No role sees what it may not, on any page: a walk over every URL pattern of the app.

The fixture puts a distinctive marker in everything that is hidden from someone:
- the grader's work (rationale, version, scores, confidence, conversation, and a flag
  the redistribution config caps, so the grading panel's table of capped flags has a
  row): hidden from an annotator under blind review until they rank the group;
- another annotator's independent ranking (its rationales): hidden from an annotator
  under k-way overlap until they rank the group;
- another auditor's verdict (its notes): hidden from an auditor until they give theirs.

The walk requests every named URL pattern (GET as a page and as an htmx fragment, and
POST with an empty form), so a page added later is checked without being listed here.
Each role's walk asserts that none of what is hidden from it shows anywhere; the same
walk as a researcher, and the verdict's own auditor, are the positive controls: they see
every marker, so a marker that no page shows cannot pass for a rule that holds.
"""

import pytest
from django.urls import reverse

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import save, set_policy
from tests.webapp.urlwalk import PASSING, marked_group, urls_of
from webapp.roles import AUDITOR

pytestmark = pytest.mark.django_db

GRADER_SECRETS = (
    "GRADER-RATIONALE-SECRET",  # a rationale
    "GRADER-VERSION-SECRET",  # the grading's and its run's version
    "GRADER-TRANSCRIPT-SECRET",  # what the grader did
    "918273", "0.918",  # a score
    "876543", "0.877",  # the confidence
    # Markup that only ever holds the grader's verdict: rank cells, flag badges, the panel's
    # table of trajectories whose flag the config caps.
    'class="grade"', "grade-rank", "grader #", '<span class="badge flag">', 'data-grader="[',
    'id="grading-detail"', "flag-caps-table",
)
OTHERS_SECRETS = ("OTHER-ANNOTATOR-RATIONALE-SECRET", "OTHER-ANNOTATOR-GROUP-SECRET")
VERDICT_SECRETS = ("OTHER-AUDITOR-NOTES-SECRET",)
EVERY_SECRET = GRADER_SECRETS + OTHERS_SECRETS + VERDICT_SECRETS


@pytest.fixture
def walk(tmp_path, researcher):
    """A group whose grader, another annotator and another auditor each left a marker; the
    batch's policy is blind review with 2-way overlap (tests change it)."""
    return marked_group(tmp_path, researcher)


def walk_as(client, user, urls) -> dict[str, set[str]]:
    """Every URL requested as `user` (GET page, GET fragment, POST empty): the markers each
    answer shows, by "METHOD url (name)"; a 404 fails (the walk filled a URL wrong)."""
    client.force_login(user)
    shown = {}
    for name, url in urls.items():
        for method, kwargs in (("GET", {}), ("GET htmx", {"headers": {"HX-Request": "true"}}), ("POST", {})):
            response = (client.post if method == "POST" else client.get)(url, **kwargs)
            assert response.status_code != 404, f"{url} ({name}) is not filled in right: nothing was checked"
            body = b"".join(response.streaming_content) if response.streaming else response.content
            html = body.decode(errors="replace")
            shown[f"{method} {url} ({name})"] = {marker for marker in EVERY_SECRET if marker in html}
    return shown


def leaks(shown: dict[str, set[str]], hidden: tuple[str, ...]) -> dict[str, set[str]]:
    return {where: markers & set(hidden) for where, markers in shown.items() if markers & set(hidden)}


def test_a_blind_annotator_sees_nothing_of_the_grader_or_of_other_annotators(client, annotator, walk):
    shown = walk_as(client, annotator, urls_of(*walk))
    assert not leaks(shown, GRADER_SECRETS + OTHERS_SECRETS + VERDICT_SECRETS)
    assert any(where.startswith("GET /groups/") for where in shown), "the walk never reached the group page"


def test_an_annotator_under_k_way_overlap_sees_the_grader_but_no_other_annotator(client, annotator, walk):
    group, grading, item = walk
    set_policy(group.batch, blind=False, overlap=2)
    shown = walk_as(client, annotator, urls_of(group, grading, item))
    assert not leaks(shown, OTHERS_SECRETS + VERDICT_SECRETS)
    assert set().union(*shown.values()) & set(GRADER_SECRETS), "not blind: the grader shows (the walk can see)"


def test_an_auditor_sees_the_grader_but_no_other_auditors_verdict(client, walk):
    shown = walk_as(client, make_user("auditor", AUDITOR), urls_of(*walk))
    assert not leaks(shown, VERDICT_SECRETS)
    seen = set().union(*shown.values())
    assert {"GRADER-RATIONALE-SECRET", "GRADER-VERSION-SECRET", "flag-caps-table"} <= seen, "auditors audit the grader"


def test_the_same_walk_shows_a_researcher_the_grader_and_every_annotator(client, researcher, walk):
    shown = set().union(*walk_as(client, researcher, urls_of(*walk)).values())
    # Confidence and scores at full precision are markers in case a page ever prints them.
    assert shown >= set(GRADER_SECRETS + OTHERS_SECRETS) - {"grade-rank", "918273", "876543", "0.877"}


def test_the_auditor_who_gave_the_verdict_sees_it(client, walk):
    group, grading, item = walk
    client.force_login(item.verdicts.get().auditor)
    assert "OTHER-AUDITOR-NOTES-SECRET" in client.get(reverse("audit_item", args=[item.pk])).content.decode()


def test_once_the_annotator_ranks_the_group_the_grader_and_the_others_are_shown(client, annotator, walk):
    group, grading, _ = walk
    save(group, annotator, PASSING)
    client.force_login(annotator)
    html = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "GRADER-RATIONALE-SECRET" in html
    assert client.get(reverse("grading_detail", args=[grading.pk])).status_code == 200
    history = client.get(reverse("ranking_history", args=[group.pk])).content.decode()
    assert "OTHER-ANNOTATOR-RATIONALE-SECRET" in history
