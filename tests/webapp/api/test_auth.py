"""Who may call what: no token, a wrong or revoked token, a role that may not, a user with no role."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from tests.django_fixtures import make_user
from webapp.models import ApiToken, GradingRun, Run, RunStep
from webapp.roles import ANNOTATOR, AUDITOR

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(sample_batch):
    """(method, path, body) of a call to each operation, on the sample batch (step 0 of a run)."""
    pk = sample_batch.pk
    run = Run.objects.create(name="r")
    RunStep.objects.create(run=run, number=0, batch=sample_batch)
    return {
        "batches_list": ("get", "/api/batches", None),
        "batch_status": ("get", f"/api/batches/{pk}", None),
        "batch_upload": ("post", "/api/batches?name=new", b""),
        "batch_import_files": ("form", "/api/batches/import?name=new&format=jsonl",
                               {"paths": SimpleUploadedFile("a.jsonl", b"{}")}),
        "grading_launch": ("post", f"/api/batches/{pk}/gradings", {"grader": "heuristic"}),
        "advantages": ("get", f"/api/batches/{pk}/advantages", None),
        "export_launch": ("post", f"/api/batches/{pk}/exports", {}),
        "export_status": ("get", "/api/exports/1", None),
        "export_file": ("get", "/api/exports/1/files/manifest.json", None),
        "step_submit": ("post", "/api/steps?run=r&step=1", b""),
        "step_rewards": ("get", f"/api/steps/{pk}", None),
        "runs_list": ("get", "/api/runs", None),
        "run_detail": ("get", f"/api/runs/{run.pk}", None),
        "run_step": ("get", f"/api/runs/{run.pk}/steps/0", None),
        "run_figures": ("get", f"/api/runs/{run.pk}/figures", None),
        "run_advantages": ("get", f"/api/runs/{run.pk}/advantages", None),
    }


def call(client, method, path, body, headers):
    if method == "get":
        return client.get(path, headers=headers)
    if method == "form":  # multipart, files in `body`
        return client.post(path, body, headers=headers)
    if isinstance(body, bytes):
        return client.post(path, body, content_type="application/x-ndjson", headers=headers)
    return client.post(path, body, content_type="application/json", headers=headers)


def test_the_calls_cover_every_operation(calls):
    from webapp.api.endpoints import api

    operations = {op["operationId"] for path in api.get_openapi_schema()["paths"].values() for op in path.values()}
    assert operations == set(calls)


@pytest.mark.parametrize(("headers", "message"), [
    ({}, "no Authorization header: send 'Authorization: Bearer <token>'"),
    ({"Authorization": "Token abc"}, "the Authorization header must be 'Bearer <token>'"),
    ({"Authorization": "Bearer "}, "the Authorization header must be 'Bearer <token>'"),
    ({"Authorization": "Bearer gagar_not-a-token"}, "unknown API token"),
])
def test_every_operation_refuses_a_call_without_a_valid_token(client, calls, headers, message):
    for name, (method, path, body) in calls.items():
        response = call(client, method, path, body, headers)
        assert response.status_code == 401, name
        assert response.json() == {"errors": [message]}, name
        assert response["WWW-Authenticate"] == "Bearer"


def test_a_revoked_token_and_an_inactive_users_token_are_refused(client, researcher, token_of, calls, settings):
    settings.GAGAR_API_TOKEN_FAILURE_LIMIT = 100  # every refusal here is counted (test_throttle.py)
    revoked = token_of(researcher)
    ApiToken.objects.filter(user=researcher).update(revoked_at=timezone.now())
    gone = make_user("gone", "researcher")
    inactive = token_of(gone)
    gone.is_active = False
    gone.save()
    for value, message in ((revoked, "this API token was revoked"), (inactive, "this API token's user is inactive")):
        for name, (method, path, body) in calls.items():
            response = call(client, method, path, body, {"Authorization": f"Bearer {value}"})
            assert (response.status_code, response.json()) == (401, {"errors": [message]}), name


def test_a_user_without_a_role_gets_403_from_every_operation(client, outsider, bearer, calls):
    headers = bearer(outsider)
    for name, (method, path, body) in calls.items():
        response = call(client, method, path, body, headers)
        assert response.status_code == 403, name
        assert response.json()["errors"][0].startswith("needs the role researcher"), name


@pytest.mark.parametrize("role", [ANNOTATOR, AUDITOR])
def test_a_reader_reads_status_but_may_not_upload_grade_or_fetch_rankings(client, bearer, calls, role):
    headers = bearer(make_user(f"user-{role}", role))
    for name, (method, path, body) in calls.items():
        response = call(client, method, path, body, headers)
        if name in ("batches_list", "batch_status", "runs_list", "run_detail"):
            assert response.status_code == 200, name
        else:
            assert response.status_code == 403, name
            assert response.json() == {"errors": ["needs the role researcher"]}, name
    assert not GradingRun.objects.exists()


def test_a_reader_sees_every_batch_of_the_team(client, bearer, sample_batch, researcher):
    """Batches are shared within the team, as on the web pages."""
    response = client.get("/api/batches?name=sample", headers=bearer(make_user("anna", ANNOTATOR)))
    assert [b["id"] for b in response.json()] == [sample_batch.pk]
