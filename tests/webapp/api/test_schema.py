"""Schemathesis against the app's own OpenAPI schema, called in-process over WSGI with a
researcher's token: whatever it sends, no answer is a 500 and every answer is what the
schema says (status, content type, body)."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis import checks

pytestmark = pytest.mark.django_db

schemathesis.serializer.alias("application/x-ndjson", "application/octet-stream")  # rollouts: bytes as they are
# Two checks ask what a schema cannot say here: any bytes fit the rollouts body's schema yet
# most are not rollouts (400, not the 2xx "positive data" expects), and unknown query
# parameters are ignored, as most HTTP APIs do, not refused ("negative data").
EXCLUDED = [checks.positive_data_acceptance, checks.negative_data_rejection]


@pytest.fixture
def api_schema(db, settings):
    settings.ALLOWED_HOSTS = ["localhost"]  # the Host schemathesis sends over WSGI
    # As Django's test client does: a request must not close the connection that holds the
    # test's transaction.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_call_makes_the_app_fail(case, researcher, token_of, sample_batch):
    if case.query and "wait" in case.query:
        case.query["wait"] = 0  # a generated wait would only make the run slow
    if isinstance((case.path_parameters or {}).get("batch_id"), int) and case.path_parameters["batch_id"] % 2:
        case.path_parameters["batch_id"] = sample_batch.pk  # so that what works is tried too, not only 404s
    case.call_and_validate(headers={"Authorization": f"Bearer {token_of(researcher)}"}, excluded_checks=EXCLUDED)
