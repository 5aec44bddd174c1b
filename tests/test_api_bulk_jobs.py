"""The bulk job API: upload a file as multipart, follow the job, download its results once
(and only once) it has succeeded. A job is seen, downloaded, cancelled and retried by whoever
asked for it and by admins alone."""

from __future__ import annotations

import csv
import io

from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from models_app.bulk.files import RESULT_COLUMNS
from models_app.bulk.run import bulk_job_execute
from models_app.models import BulkJob

URL = "/api/v1/bulk-jobs"
DATA = b"id,title\n1,icu nurse\n2,Senior Java Engineer\n3,=cmd()\n"


def upload(client, data=DATA, name="ads.csv", **fields):
    body = {"taxonomy": "jobs", "file": SimpleUploadedFile(name, data), "column": "title"}
    return client.post(URL, {**body, **fields}, format="multipart")


def client_of(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def test_an_upload_is_queued_then_followed_to_its_results(api_client, tiny_taxonomy, curator):
    response = upload(api_client)
    assert response.status_code == 202, response.content
    job = response.json()
    assert (job["status"], job["taxonomy"], job["column"], job["format"]) == (
        "queued", "jobs", "title", "csv",
    )  # fmt: skip
    assert job["results"] == {} and job["requested_by"] == "carla"
    pending = api_client.get(f"{URL}/{job['id']}/result.csv")
    assert pending.status_code == 409
    assert pending.json() == {
        "status": [f"bulk job {job['id']} is queued: its results download once it succeeds"]
    }

    bulk_job_execute(job_id=job["id"])  # what the worker does with the task the upload sent

    done = api_client.get(f"{URL}/{job['id']}").json()
    assert (done["status"], done["rows_done"], done["progress"]) == ("succeeded", 3, 1.0)
    assert done["model_version"] == "jobs/v1"
    assert done["results"]["csv"].endswith(f"/api/v1/bulk-jobs/{job['id']}/result.csv")
    response = api_client.get(f"{URL}/{job['id']}/result.csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="ads-normalized.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert list(rows[0]) == ["id", "title", *RESULT_COLUMNS]
    assert [r["group_code"] for r in rows[:2]] == ["29-1141", "15-1252"]
    assert rows[2]["title"] == "'=cmd()"
    lines = b"".join(api_client.get(f"{URL}/{job['id']}/result.jsonl").streaming_content)
    assert len(lines.decode().splitlines()) == 3
    listed = api_client.get(URL).json()
    assert [row["id"] for row in listed["results"]] == [job["id"]]


def test_a_bad_file_is_a_400_naming_the_field(api_client, tiny_taxonomy):
    response = upload(api_client, column="job")
    assert response.status_code == 400
    assert response.json() == {
        "file": ["ads.csv has no column 'job'; its columns are 'id', 'title'"]
    }
    response = upload(api_client, data=b"title\ncaf\xe9\n")
    assert response.status_code == 400
    assert "is not UTF-8: line 2" in response.json()["file"][0]
    response = api_client.post(URL, {"taxonomy": "jobs"}, format="multipart")
    assert response.json() == {"file": ["No file was submitted."]}
    assert not BulkJob.objects.exists()


def test_an_upload_over_the_limit_is_a_400(api_client, tiny_taxonomy, settings):
    settings.SIAMWEB_BULK_MAX_BYTES = 1024
    response = upload(api_client, data=b"title\n" + b"icu nurse\n" * 200)
    assert response.status_code == 400
    assert "the largest file a bulk job takes" in response.json()["file"][0]


def test_a_taxonomy_without_a_live_model_is_a_409(api_client, db):
    from annotations.services.taxonomy import taxonomy_import
    from tests.conftest import TINY_CSV

    taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    response = upload(api_client)
    assert response.status_code == 409
    assert "has no live model yet" in response.json()["taxonomy"][0]


def test_a_json_body_is_refused(api_client, tiny_taxonomy):
    response = api_client.post(URL, {"taxonomy": "jobs"}, format="json")
    assert response.status_code == 415


def test_a_job_is_its_owners_and_the_admins_alone(
    api_client, tiny_taxonomy, other_curator, admin_user
):
    job_id = upload(api_client).json()["id"]
    bulk_job_execute(job_id=job_id)
    other = client_of(other_curator)
    # Another curator cannot tell it from a job that never was.
    for path in ("", "/result.csv", "/result.jsonl"):
        response = other.get(f"{URL}/{job_id}{path}")
        assert (response.status_code, response.json()) == (404, {"detail": f"no bulk job {job_id}"})
    assert other.post(f"{URL}/{job_id}/retry").status_code == 404
    assert other.get(URL).json()["results"] == []
    admin = client_of(admin_user)
    assert [row["id"] for row in admin.get(URL).json()["results"]] == [job_id]
    assert admin.get(f"{URL}/{job_id}/result.csv").status_code == 200


def test_the_owner_or_an_admin_cancels(api_client, tiny_taxonomy, other_curator, admin_user):
    job_id = upload(api_client).json()["id"]
    response = client_of(other_curator).post(f"{URL}/{job_id}/cancel")
    assert response.status_code == 404
    assert BulkJob.objects.get(id=job_id).status == "queued"
    response = client_of(admin_user).post(f"{URL}/{job_id}/cancel")
    assert (response.status_code, response.json()["status"]) == (200, "cancelled")
    again = api_client.post(f"{URL}/{job_id}/cancel")
    assert again.status_code == 409
    assert again.json() == {
        "status": [f"bulk job {job_id} was cancelled: there is nothing to stop"]
    }
    retry = api_client.post(f"{URL}/{job_id}/retry")
    assert retry.status_code == 409


def test_results_download_whatever_the_accept_header_asks_for(api_client, tiny_taxonomy):
    job_id = upload(api_client).json()["id"]
    early = api_client.get(f"{URL}/{job_id}/result.csv", HTTP_ACCEPT="text/csv")
    assert (early.status_code, early["Content-Type"]) == (409, "application/json")
    bulk_job_execute(job_id=job_id)
    for kind, accept in (("csv", "text/csv"), ("jsonl", "application/x-ndjson")):
        response = api_client.get(f"{URL}/{job_id}/result.{kind}", HTTP_ACCEPT=accept)
        assert response.status_code == 200, response.content
        body = b"".join(response.streaming_content).decode()
        assert len(body.splitlines()) == (4 if kind == "csv" else 3)


def test_a_running_job_asked_to_cancel_says_it_is_stopping(api_client, tiny_taxonomy):
    job_id = upload(api_client).json()["id"]
    BulkJob.objects.filter(id=job_id).update(status="running", heartbeat_at=timezone.now())
    response = api_client.post(f"{URL}/{job_id}/cancel")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["cancel_requested"]) == ("running", True)
    result = api_client.get(f"{URL}/{job_id}/result.csv")
    assert (result.status_code, result.json()) == (
        409, {"status": [f"bulk job {job_id} is stopping: it has no result"]},
    )  # fmt: skip


def test_an_unknown_taxonomy_is_named(api_client, tiny_taxonomy):
    response = upload(api_client, taxonomy="nosuch")
    assert (response.status_code, response.json()) == (
        400, {"taxonomy": ["taxonomy 'nosuch' does not exist."]},
    )  # fmt: skip
    assert not BulkJob.objects.exists()


def test_the_owner_or_an_admin_deletes_a_finished_job(
    api_client, tiny_taxonomy, other_curator, admin_user
):
    job_id = upload(api_client).json()["id"]
    response = api_client.delete(f"{URL}/{job_id}")
    assert (response.status_code, response.json()) == (
        409, {"status": [f"bulk job {job_id} is queued: cancel it first"]},
    )  # fmt: skip
    bulk_job_execute(job_id=job_id)
    assert api_client.get(f"{URL}/{job_id}").json()["kept_until"] is not None
    assert client_of(other_curator).delete(f"{URL}/{job_id}").status_code == 404
    assert client_of(admin_user).delete(f"{URL}/{job_id}").status_code == 204
    assert api_client.get(f"{URL}/{job_id}").status_code == 404


def test_an_unknown_job_is_a_404(api_client, tiny_taxonomy):
    assert api_client.get(f"{URL}/999999").status_code == 404
    assert api_client.get(f"{URL}/999999/result.jsonl").status_code == 404


def test_an_upload_far_over_the_limit_is_refused_before_it_is_read(
    api_client, client, curator, tiny_taxonomy, settings
):
    settings.SIAMWEB_BULK_MAX_BYTES = 1024
    big = b"title\n" + b"icu nurse\n" * 20_000  # 200 KB: past the limit and the form's slack
    response = upload(api_client, data=big)
    assert response.status_code == 413
    assert response.json()["detail"].startswith("the request is 195.6")
    client.force_login(curator)
    page = client.post(
        "/bulk/", {"taxonomy": "jobs", "column": "title", "file": SimpleUploadedFile("a.csv", big)}
    )
    assert page.status_code == 413
    assert 'data-testid="too-large"' in page.content.decode()
    assert not BulkJob.objects.exists()


def test_a_review_threshold_outside_0_to_1_is_a_400(api_client, tiny_taxonomy):
    response = upload(api_client, review_below="1.5")
    assert response.status_code == 400
    assert response.json() == {"review_below": ["Ensure this value is less than or equal to 1.0."]}
    response = upload(api_client, review_below="0.5")
    assert (response.status_code, response.json()["review_below"]) == (202, 0.5)


def test_a_review_margin_outside_0_to_1_is_a_400(api_client, tiny_taxonomy):
    response = upload(api_client, review_margin_below="-0.1")
    assert response.status_code == 400
    assert response.json() == {
        "review_margin_below": ["Ensure this value is greater than or equal to 0.0."]
    }
    response = upload(api_client, review_margin_below="0.05")
    assert response.status_code == 202
    assert (response.json()["review_margin_below"], response.json()["review_below"]) == (0.05, None)
