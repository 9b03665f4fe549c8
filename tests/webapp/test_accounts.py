"""Accounts: failed logins are throttled per account and per address, and the
production profile passes Django's deployment checks."""

import os
import re
import secrets
import shlex
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.django_fixtures import PASSWORD, make_user
from webapp.roles import RESEARCHER

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 5  # AXES_FAILURE_LIMIT's default


def log_in(client, username, password, address="198.51.100.1", **headers):
    return client.post(reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=address, headers=headers)


def logged_in(response) -> bool:
    return response.status_code == 302 and response.url == reverse("index")


@pytest.fixture
def users(db):
    return [make_user(name, RESEARCHER) for name in ("rita", "sam", "tom", "uma", "vic", "wes")]


def test_the_right_password_logs_in_after_fewer_failures_than_the_limit(client, users):
    for _ in range(LIMIT - 1):
        assert log_in(client, "rita", "wrong").status_code == 200
    assert logged_in(log_in(client, "rita", PASSWORD))


def test_after_the_limit_an_account_is_locked_even_with_the_right_password(client, users):
    for attempt in range(LIMIT):
        response = log_in(client, "rita", "wrong", address=f"198.51.100.{attempt + 1}")
    assert response.status_code == 429
    response = log_in(client, "rita", PASSWORD, address="203.0.113.7")
    assert response.status_code == 429 and "_auth_user_id" not in client.session
    text = " ".join(response.content.decode().split())
    assert "Too many failed logins (5) for this account or from this address" in text
    assert "locked for 15 minutes, even with the right password" in text
    assert logged_in(log_in(client, "sam", PASSWORD, address="198.51.100.1"))


def test_after_the_limit_an_address_is_locked_for_every_account(client, users):
    for user in users[1:]:
        log_in(client, user.username, "wrong", address="198.51.100.9")
    assert log_in(client, "rita", PASSWORD, address="198.51.100.9").status_code == 429
    assert logged_in(log_in(client, "rita", PASSWORD, address="198.51.100.10"))


def test_behind_a_proxy_the_address_is_the_one_the_proxy_saw(client, users, settings):
    settings.GAGAR_TRUSTED_PROXIES = 1
    for attempt, user in enumerate(users[1:]):
        # the client writes what it likes left of the address the proxy appends; it changes nothing
        log_in(client, user.username, "wrong", address="10.0.0.2", x_forwarded_for=f"192.0.2.{attempt}, 203.0.113.5")
    assert log_in(client, "rita", PASSWORD, address="10.0.0.2", x_forwarded_for="203.0.113.5").status_code == 429
    assert logged_in(log_in(client, "rita", PASSWORD, address="10.0.0.2", x_forwarded_for="203.0.113.6"))
    # no address where the proxy's entry should be: the request did not come through it
    assert log_in(client, "rita", "wrong", address="10.0.0.3", x_forwarded_for="not-an-address").status_code == 200
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.5", "10.0.0.3"}


def test_a_malformed_username_is_a_form_error_not_a_server_error(client, users):
    for username in ("ri\x00ta", "r" * 10_000, "rita\u202e"):
        assert log_in(client, username, "wrong").status_code == 200


# --- the production profile --------------------------------------------------------------


def manage(tmp_path, *args, **env):
    """`manage.py` in a process of its own, with this run's environment less what the test
    run itself sets (the browser tests allow async-unsafe calls, which check --deploy flags)."""
    unset = ("DEBUG", "DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    environment = {key: value for key, value in os.environ.items() if key not in unset}
    environment.update(GAGAR_DATA_DIR=str(tmp_path), SECRET_KEY=secrets.token_urlsafe(50), **env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True)


def test_the_deployment_checks_find_nothing_in_the_production_profile(tmp_path):
    done = manage(tmp_path, "check", "--deploy", "--fail-level", "DEBUG",
                  GAGAR_PROFILE="production", ALLOWED_HOSTS="gagar.example.org")
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_without_the_profile_the_deployment_checks_report_what_it_sets(tmp_path):
    done = manage(tmp_path, "check", "--deploy", ALLOWED_HOSTS="gagar.example.org")
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):  # HSTS, SSL, cookies
        assert warning in done.stderr


@pytest.mark.parametrize(("env", "reason"), [
    ({"GAGAR_PROFILE": "production", "ALLOWED_HOSTS": "gagar.example.org", "DEBUG": "1"}, "DEBUG must be off"),
    ({"GAGAR_PROFILE": "production"}, "ALLOWED_HOSTS is required"),
    ({"GAGAR_PROFILE": "prod"}, "GAGAR_PROFILE='prod': the only profile is 'production'"),
])
def test_the_profile_refuses_what_cannot_be_served(tmp_path, env, reason):
    done = manage(tmp_path, "check", **env)
    assert done.returncode != 0 and reason in done.stderr


def test_add_user_refuses_a_password_the_validators_refuse_and_creates_nobody():
    with pytest.raises(CommandError) as refused:
        call_command("add_user", "zoe", "--role", RESEARCHER, "--password", "x")
    assert "--password: This password is too short. It must contain at least 8 characters." in str(refused.value)
    assert not get_user_model().objects.filter(username="zoe").exists()
    call_command("add_user", "zoe", "--role", RESEARCHER, "--password", "a-long-passphrase", stdout=StringIO())
    assert get_user_model().objects.get(username="zoe").check_password("a-long-passphrase")


def test_the_readme_says_how_to_add_annotators_and_auditors_and_its_commands_work():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    lines = re.findall(r"^\.venv/bin/python manage\.py (add_user .+)$", readme, re.M)
    assert {line.split("--role ")[1].split()[0] for line in lines} == {"annotator", "auditor"}
    for line in lines:
        call_command(*shlex.split(line), verbosity=0)
    assert {u.username: [g.name for g in u.groups.all()] for u in get_user_model().objects.all()} == {
        "anna": ["annotator"], "otto": ["auditor"]}
