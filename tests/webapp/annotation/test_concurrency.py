"""Many annotators saving one group at the same instant, each request in its own thread with
its own database connection, through the real views: saves to different chains all land,
saves to the same chain keep the optimistic check."""

import json
import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, review_batch, set_policy
from webapp.models import Annotation, Group
from webapp.roles import ANNOTATOR

pytestmark = pytest.mark.django_db(transaction=True)

ANNOTATORS = 10
ROUNDS = 3
MINE = [["t5"], ["t1", "t2"], ["t3"], ["t4"]]


@pytest.fixture
def group(tmp_path):
    return Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")


def post_all_at_once(posts):
    """Send every (user, url, data) in `posts` at the same instant; the status codes, in order."""
    barrier = threading.Barrier(len(posts))
    statuses = [None] * len(posts)

    def post(index, user, url, data):
        try:
            client = Client()
            client.force_login(user)
            barrier.wait()
            statuses[index] = client.post(url, data).status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(index, *p)) for index, p in enumerate(posts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def ranking(user, group, based_on, tiers=MINE):
    return user, reverse("ranking_save", args=[group.pk]), {"tiers": json.dumps(tiers), "based_on_version": based_on}


def test_saves_to_different_chains_at_the_same_instant_all_land(group, researcher):
    """Ten annotators, each in a chain of their own, save together three times; from the second
    round on a researcher accepts an annotator's first ranking into the final chain at the same instant."""
    set_policy(group.batch, overlap=3)
    users = [make_user(f"annotator{n}", ANNOTATOR) for n in range(ANNOTATORS)]
    heads = {user.pk: 0 for user in users}
    for round_ in range(ROUNDS):
        posts = [ranking(user, group, heads[user.pk]) for user in users]
        if round_:
            final_head = max(Annotation.objects.filter(group=group, independent=False)
                             .values_list("version", flat=True), default=0)
            posts.append((researcher, reverse("ranking_revert", args=[group.pk]),
                          {"to_version": round_, "based_on_version": final_head}))
        statuses = post_all_at_once(posts)
        assert statuses == [302] * len(posts)
        # ordered by version, so each user's latest save is the one the dict keeps
        heads = dict(Annotation.objects.filter(group=group).order_by("version").values_list("user", "version"))
    saves = ANNOTATORS * ROUNDS + ROUNDS - 1
    assert sorted(Annotation.objects.filter(group=group).values_list("version", flat=True)) == list(range(1, saves + 1))
    for user in users:  # each chain is whole: every save based on the one before it
        chain = list(Annotation.objects.filter(group=group, user=user).order_by("version")
                     .values_list("based_on_version", "version"))
        assert [base for base, _ in chain] == [0] + [version for _, version in chain[:-1]]
    accepted = Annotation.objects.filter(group=group, independent=False).order_by("version")
    assert [(a.kind, a.reverted_to) for a in accepted] == [("accept", n) for n in range(1, ROUNDS)]


def test_saves_to_the_same_chain_at_the_same_instant_store_one_and_refuse_the_rest(group):
    users = [make_user(f"annotator{n}", ANNOTATOR) for n in range(ANNOTATORS)]
    tiers = [MINE if n % 2 else GRADER_TIERS for n in range(ANNOTATORS)]
    statuses = post_all_at_once([ranking(user, group, 0, tiers[n]) for n, user in enumerate(users)])
    assert sorted(statuses) == [302] + [409] * (ANNOTATORS - 1)
    stored = Annotation.objects.get(group=group)
    assert (stored.version, stored.based_on_version, stored.independent) == (1, 0, False)
    assert stored.tiers == tiers[statuses.index(302)]
