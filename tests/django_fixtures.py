"""Fixtures shared by the Django suites: users with each role, and the project's sample batch.

tests/conftest.py registers this module as a plugin once Django is set up; tests that
make their own users import `make_user` and `PASSWORD` from here.
"""

import pytest
from django.contrib.auth.models import Group as AuthGroup
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.factories import SAMPLE_ROLLOUTS
from webapp.models import Batch
from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER

PASSWORD = "a-long-test-password"


def make_user(username, *roles):
    user = User.objects.create_user(username=username, password=PASSWORD)
    for role in roles:
        user.groups.add(AuthGroup.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def researcher(db):
    return make_user("rita", RESEARCHER)


@pytest.fixture
def annotator(db):
    return make_user("anna", ANNOTATOR)


@pytest.fixture
def auditor(db):
    return make_user("otto", AUDITOR)


@pytest.fixture
def outsider(db):
    """Logged in, but holds no role."""
    return make_user("olga")


@pytest.fixture
def sample_batch(db):
    call_command("import_rollouts", str(SAMPLE_ROLLOUTS), batch="sample", verbosity=0)
    return Batch.objects.get(name="sample")
