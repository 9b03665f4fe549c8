"""Bad parameters name where they were sent and which field (422); a body that is not JSON is
a 400; nothing of it is a 500 or a traceback."""

import json

import pytest

from webapp.models import GradingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def headers(researcher, bearer):
    return bearer(researcher)


def test_each_bad_field_is_named_by_where_it_was_sent(client, headers, sample_batch):
    body = client.post(f"/api/batches/{sample_batch.pk}/gradings", {"grader": 5, "regrade": "perhaps"},
                       content_type="application/json", headers=headers)
    assert (body.status_code, body.json()["errors"]) == (422, [
        "body.grader: Input should be a valid string",
        "body.regrade: Input should be a valid boolean, unable to interpret input"])
    path = client.get("/api/batches/abc", headers=headers)
    assert path.json() == {"errors": ["path.batch_id: Input should be a valid integer, unable to parse string as an "
                                      "integer"]}
    nested = client.post("/api/steps?run=r&step=1&config=" + json.dumps({"params": 5}), b"{}",
                         content_type="application/x-ndjson", headers=headers)
    assert nested.json() == {"errors": ["query.config.params: Input should be a valid dictionary"]}
    wait = client.get(f"/api/steps/{sample_batch.pk}?wait=121", headers=headers)
    assert wait.json() == {"errors": ["query.wait: Input should be less than or equal to 120"]}


def test_a_body_that_is_not_json_is_a_400(client, headers, sample_batch):
    response = client.post(f"/api/batches/{sample_batch.pk}/gradings", "{", content_type="application/json",
                           headers=headers)
    assert (response.status_code, response.json()) == (400, {"errors": ["Cannot parse request body"]})
    assert not GradingRun.objects.exists()


def test_an_unknown_grader_profile_is_a_400_and_launches_nothing(client, headers, sample_batch):
    response = client.post(f"/api/batches/{sample_batch.pk}/gradings", {"grader": "tests.workers.graders:EchoGrader"},
                           content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("grader: unknown profile 'tests.workers.graders:EchoGrader'")
    assert not GradingRun.objects.exists()


def test_an_unknown_export_or_file_is_a_404(client, headers):
    assert client.get("/api/exports/999", headers=headers).json() == {"errors": ["No Export matches the given query."]}
    assert client.get("/api/exports/999/files/manifest.json", headers=headers).status_code == 404


def test_a_second_launch_names_the_run_already_grading(client, headers, sample_batch):
    url = f"/api/batches/{sample_batch.pk}/gradings"
    first = client.post(url, {"grader": "heuristic"}, content_type="application/json", headers=headers).json()
    second = client.post(url, {"grader": "heuristic"}, content_type="application/json", headers=headers).json()
    assert first["run"] is not None and first["queued"] > 0
    assert (second["run"], second["queued"], second["active_run"]) == (None, 0, first["run"])
    assert second["skipped"] == first["queued"]
