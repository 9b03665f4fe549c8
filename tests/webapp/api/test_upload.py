"""Uploading a batch: JSONL, gzip or zstd bodies, streamed, whole or not at all, with a size limit."""

import gzip
import json

import pytest
import zstandard

from tests.factories import group
from webapp.models import Batch, Trajectory

pytestmark = pytest.mark.django_db


def jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


RECORDS = group("g1", [1, 1, 0]) + group("g2", [1, 0])


@pytest.fixture
def upload(client, researcher, bearer):
    headers = bearer(researcher)

    def post(body: bytes, query="name=run-7/step-1", **extra):
        return client.post(f"/api/batches?{query}", body, content_type="application/x-ndjson",
                           headers={**headers, **extra})

    return post


@pytest.mark.parametrize(("encode", "encoding"), [
    (lambda b: b, None), (gzip.compress, "gzip"), (lambda b: zstandard.ZstdCompressor().compress(b), "zstd"),
])
def test_it_imports_a_body_plain_gzip_or_zstd(upload, encode, encoding, settings):
    extra = {"Content-Encoding": encoding} if encoding else {}
    response = upload(encode(jsonl(RECORDS)), query="name=run-7/step-1&filename=rollouts.jsonl", **extra)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["created"] and body["new_groups"] == 2 and body["new_trajectories"] == 5
    assert body["batch"]["name"] == "run-7/step-1" and body["batch"]["n_passed"] == 3
    batch = Batch.objects.get(name="run-7/step-1")
    assert batch.sources == ["rollouts.jsonl" + {None: "", "gzip": ".gz", "zstd": ".zst"}[encoding]]
    assert not list((settings.DATA_DIR / "api").iterdir())  # the received body is gone


def test_the_same_upload_again_changes_nothing_and_more_extends_the_batch(upload):
    assert upload(jsonl(RECORDS)).status_code == 201
    again = upload(jsonl(RECORDS), query="name=run-7/step-1&append=true")
    assert again.status_code == 200
    assert again.json()["new_trajectories"] == 0 and again.json()["unchanged_trajectories"] == 5
    more = upload(jsonl(group("g3", [0, 1])), query="name=run-7/step-1&append=true")
    assert (more.status_code, more.json()["new_groups"]) == (200, 1)
    assert Trajectory.objects.count() == 7


def test_an_upload_into_an_existing_batch_needs_append(upload):
    # Regression: uploading to an existing name silently added to that batch.
    assert upload(jsonl(RECORDS)).status_code == 201
    response = upload(jsonl(group("g3", [0, 1])))
    assert response.status_code == 400
    assert response.json() == {"errors": [
        "--batch: batch: batch 'run-7/step-1' already exists; to add these rollouts to it, import with --append "
        "(API: append=true), or choose a new name"]}
    assert Trajectory.objects.count() == 5


def test_bad_lines_are_listed_by_file_line_and_field_and_nothing_is_imported(upload):
    records = group("g1", [1, 0])
    records.insert(1, {"group_id": "g1", "trajectory_id": "t9", "reward": "high", "patch": ""})
    body = jsonl(records) + b"{not json\n"
    response = upload(body, query="name=b&filename=step.jsonl")
    assert response.status_code == 400
    assert response.json() == {"errors": [
        "step.jsonl:2: reward: must be a number, got a string",
        "step.jsonl:4: line: not valid JSON: Expecting property name enclosed in double quotes at column 2",
    ]}
    assert not Batch.objects.exists()


def test_a_conflicting_line_fails_the_whole_upload(upload):
    upload(jsonl(RECORDS))
    changed = group("g9", [1, 0]) + [dict(RECORDS[0], reward=0.5)]
    response = upload(jsonl(changed), query="name=run-7/step-1&append=true")
    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("upload.jsonl:3: trajectory_id: conflicts with the content")
    assert not Trajectory.objects.filter(group__group_id="g9").exists()


def test_a_body_that_is_not_what_its_encoding_says_is_refused(upload):
    response = upload(b"\x1f\x8b\x08\x00 this is cut short", **{"Content-Encoding": "gzip"})
    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("upload.jsonl.gz:1: file: truncated or corrupt gzip data")
    plain = upload(jsonl(RECORDS), **{"Content-Encoding": "zstd"})
    assert plain.json() == {"errors": ["upload.jsonl.zst: file: name ends in .zst but the contents are not zstd data"]}
    assert not Batch.objects.exists()


def test_an_unknown_encoding_is_415(upload):
    response = upload(jsonl(RECORDS), **{"Content-Encoding": "br"})
    assert response.status_code == 415
    assert response.json() == {"errors": ["Content-Encoding 'br' is not supported: send gzip, zstd or none"]}


def test_a_body_over_the_limit_is_413_before_it_is_read(upload, settings):
    body = jsonl(RECORDS)
    settings.GAGAR_API_UPLOAD_LIMIT = len(body) - 1
    response = upload(body)
    assert response.status_code == 413
    assert response.json() == {"errors": [
        f"the body is {len(body)} bytes, over the limit of {len(body) - 1} (GAGAR_API_UPLOAD_LIMIT)"]}
    assert not Batch.objects.exists()
    settings.GAGAR_API_UPLOAD_LIMIT = len(body)
    assert upload(body).status_code == 201


def test_an_empty_body_and_bad_parameters_are_clear_errors(client, researcher, bearer, upload):
    headers = bearer(researcher)
    empty = client.post("/api/batches?name=b", b"", content_type="application/x-ndjson", headers=headers,
                        CONTENT_LENGTH="0")
    assert (empty.status_code, empty.json()) == (400, {"errors": ["upload.jsonl: file: empty file (no records)"]})
    unsaid = client.post("/api/batches?name=b", b"", content_type="application/x-ndjson", headers=headers)
    assert (unsaid.status_code, unsaid.json()) == (
        411, {"errors": ["Content-Length is required: the body is streamed to disk, not sent chunked"]})
    response = upload(jsonl(RECORDS), query="name=b&pass_threshold=nan&filename=../x")
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert [e.split(":")[0] for e in errors] == ["query.pass_threshold", "query.filename"]
    missing = upload(jsonl(RECORDS), query="")
    assert (missing.status_code, missing.json()) == (422, {"errors": ["query.name: Field required"]})
    assert not Batch.objects.exists()


def test_a_different_pass_threshold_for_an_existing_batch_is_refused(upload):
    upload(jsonl(RECORDS))
    response = upload(jsonl(RECORDS), query="name=run-7/step-1&pass_threshold=0.5&append=true")
    assert response.status_code == 400
    assert "was imported with pass threshold 1.0" in response.json()["errors"][0]
