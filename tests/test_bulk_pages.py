"""The Bulk pages: upload a file, follow its job, download its results; a job belongs to whoever
asked for it (and admins), and a job whose worker died can be retried from its page."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from annotations.services.review.inputs import inputs_submit
from models_app.bulk.jobs import stale_seconds
from models_app.bulk.run import bulk_job_execute
from models_app.models import BulkJob

DATA = b"id,title\n1,icu nurse\n2,Senior Java Engineer\n"


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def start(client: Client, **fields) -> BulkJob:
    body = {"taxonomy": "jobs", "column": "title", "file": SimpleUploadedFile("ads.csv", DATA)}
    response = client.post("/bulk/", {**body, **fields})
    job = BulkJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/bulk/{job.id}/"
    return job


def test_a_file_uploaded_on_the_page_is_followed_to_its_downloads(curator, tiny_taxonomy):
    client = logged_in(curator)
    job = start(client, review_below="0.5", review_margin_below="0.05")
    assert (job.review_below, job.review_margin_below, job.column) == (0.5, 0.05, "title")
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert 'data-status="queued"' in page and 'hx-trigger="every 2s"' in page
    assert "less likely right than 0.5, or ahead of the runner-up by less than 0.05" in page
    bulk_job_execute(job_id=job.id)
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert 'data-status="succeeded"' in page and "hx-trigger" not in page
    download = client.get(f"/bulk/{job.id}/result.csv")
    lines = b"".join(download.streaming_content).decode().splitlines()
    assert lines[0].startswith("id,title,group_code,") and len(lines) == 3


def test_rows_sent_for_review_are_linked_to_exactly_those_rows_in_the_queue(curator, tiny_taxonomy):
    client = logged_in(curator)
    quiet = start(client, review_below="0")  # no chance is below 0: nothing is sent
    bulk_job_execute(job_id=quiet.id)
    assert "job-review-link" not in client.get(f"/bulk/{quiet.id}/").content.decode()
    BulkJob.objects.all().delete()
    # Work in the queue that no job sent.
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Truck Driver Night Shift"], source="api")
    every = start(client, review_margin_below="1")  # every margin is below 1: all are sent
    bulk_job_execute(job_id=every.id)
    page = client.get(f"/bulk/{every.id}/").content.decode()
    href = f"/review/queue/?taxonomy=jobs&amp;job={every.id}"
    link = f'<a href="{href}" data-testid="job-review-link">review them</a>'
    assert BulkJob.objects.get(id=every.id).rows_queued == 2 and link in page
    queue = client.get(f"/review/queue/?taxonomy=jobs&job={every.id}").content.decode()
    assert "icu nurse" in queue and "Senior Java Engineer" in queue
    assert "Truck Driver Night Shift" not in queue
    assert f'name="job" value="{every.id}"' in queue  # the filter stays on, and can be cleared
    # The card takes the job's rows only, and keeps the filter in its links.
    card = client.get(f"/review/?taxonomy=jobs&job={every.id}").content.decode()
    assert "Truck Driver Night Shift" not in card
    assert "icu nurse" in card or "Senior Java Engineer" in card
    assert f"job={every.id}" in card
    everything = client.get("/review/queue/?taxonomy=jobs").content.decode()
    assert "Truck Driver Night Shift" in everything and "icu nurse" in everything


def test_a_job_filter_that_is_not_an_id_is_refused_by_name(curator, tiny_taxonomy):
    response = logged_in(curator).get("/review/queue/?job=seven")
    assert response.status_code == 400
    assert "job" in response.content.decode()


def test_a_running_job_cancelled_on_its_page_shows_it_is_stopping(curator, tiny_taxonomy):
    client = logged_in(curator)
    job = start(client)
    BulkJob.objects.filter(id=job.id).update(
        status=BulkJob.Status.RUNNING, heartbeat_at=timezone.now()
    )
    page = client.post(f"/bulk/{job.id}/cancel", follow=True).content.decode()
    assert "Stopping: each worker ends after the chunk it is on" in page
    assert 'data-testid="job-stopping"' in page and 'data-testid="cancel"' not in page


def test_a_cancelled_jobs_page_says_its_rows_results_were_deleted(curator, tiny_taxonomy):
    client = logged_in(curator)
    job = start(client)
    BulkJob.objects.filter(id=job.id).update(rows_done=7)
    page = client.post(f"/bulk/{job.id}/cancel", follow=True).content.decode()
    assert 'data-testid="job-status">Cancelled<' in page
    rows = re.search(r"<dt>([^<]*)</dt><dd data-testid=\"job-rows\">(.*?)</dd>", page, re.S)
    assert rows.group(1) == "Rows done before the cancel"
    assert rows.group(2).startswith("7 ")
    assert "their results were deleted with the cancel" in rows.group(2)
    assert 'data-testid="job-downloads"' not in page


def test_a_download_of_a_job_without_a_result_says_why(curator, tiny_taxonomy):
    client = logged_in(curator)
    job = start(client)
    BulkJob.objects.filter(id=job.id).update(status=BulkJob.Status.FAILED, error="disk full")
    assert client.get(f"/bulk/{job.id}/result.xml").status_code == 404
    response = client.get(f"/bulk/{job.id}/result.csv")
    assert response.status_code == 409
    assert f"bulk job {job.id} has failed, so it has no result; retry it to go on" in (
        response.content.decode()
    )


def test_a_finished_job_is_deleted_from_its_page_after_a_confirmation(curator, tiny_taxonomy):
    client = logged_in(curator)
    job = start(client)
    assert 'data-testid="delete"' not in client.get(f"/bulk/{job.id}/").content.decode()
    refused = client.post(f"/bulk/{job.id}/delete")
    assert refused.status_code == 409 and "is queued: cancel it first" in refused.content.decode()
    bulk_job_execute(job_id=job.id)
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert f'href="/bulk/{job.id}/delete"' in page and 'data-testid="job-kept-until"' in page
    confirm = client.get(f"/bulk/{job.id}/delete").content.decode()
    assert "ads.csv as uploaded and its results are deleted for good" in confirm
    assert BulkJob.objects.filter(id=job.id).exists()  # asking is not deleting
    listing = client.post(f"/bulk/{job.id}/delete", follow=True)
    assert listing.redirect_chain == [("/bulk/", 302)]
    assert f"Bulk job #{job.id} is deleted" in listing.content.decode()
    assert not BulkJob.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("review_below", "1.5", "Also queue for review the rows less likely right than"),
        ("review_below", "half", "Also queue for review the rows less likely right than"),
        ("review_margin_below", "2", "Also queue for review the rows ahead of the runner-up by"),
        ("review_margin_below", "-0.1", "Also queue for review the rows ahead of the runner-up by"),
        ("column", "c" * 201, "CSV column to normalize"),
    ],
)
def test_a_bad_field_is_named_on_the_form_by_its_label(curator, tiny_taxonomy, field, value, label):
    body = {"taxonomy": "jobs", "column": "title", "file": SimpleUploadedFile("a.csv", DATA)}
    response = logged_in(curator).post("/bulk/", {**body, field: value})
    assert response.status_code == 400
    page = response.content.decode()
    (error,) = re.findall(r'data-testid="field-error">([^<]*)</p>', page)
    assert error.startswith(f"{label}") and f"{field}:" not in error
    if field != "column":
        assert error.endswith("than: a number from 0 to 1, such as 0.5, or nothing")
    assert not BulkJob.objects.exists()


def test_another_curators_job_is_not_there_for_them(
    curator, other_curator, admin_user, tiny_taxonomy
):
    job = start(logged_in(curator))
    bulk_job_execute(job_id=job.id)
    other = logged_in(other_curator)
    assert other.get(f"/bulk/{job.id}/").status_code == 404
    assert other.get(f"/bulk/{job.id}/result.csv").status_code == 404
    assert other.post(f"/bulk/{job.id}/retry").status_code == 404
    assert f'href="/bulk/{job.id}/"' not in other.get("/bulk/").content.decode()
    admin = logged_in(admin_user)
    assert f'href="/bulk/{job.id}/"' in admin.get("/bulk/").content.decode()
    assert admin.get(f"/bulk/{job.id}/result.jsonl").status_code == 200


def test_a_job_whose_worker_died_offers_a_retry_from_its_page(curator, tiny_taxonomy):
    client = logged_in(curator)
    job = start(client)
    BulkJob.objects.filter(id=job.id).update(
        status=BulkJob.Status.RUNNING, heartbeat_at=timezone.now()
    )
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert 'data-testid="retry"' not in page and "job-worker-lost" not in page  # alive
    silent_since = timezone.now() - timezone.timedelta(seconds=stale_seconds() + 60)
    BulkJob.objects.filter(id=job.id).update(heartbeat_at=silent_since)
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert "Its worker has not answered for 3 min" in page and 'data-testid="retry"' in page
    response = client.post(f"/bulk/{job.id}/retry")
    assert response.status_code == 302
    assert BulkJob.objects.get(id=job.id).status == BulkJob.Status.QUEUED


def test_the_form_preselects_the_only_taxonomy_and_the_page_never_calls_a_done_job_queued(
    curator, tiny_taxonomy
):
    client = logged_in(curator)
    form = client.get("/bulk/").content.decode()
    assert '<option value="jobs" selected>' in form and "---------" not in form
    upload = SimpleUploadedFile("ads.csv", DATA)
    body = {"column": "title", "file": upload, "taxonomy": "jobs"}
    response = client.post("/bulk/", body, follow=True)
    job = BulkJob.objects.get()
    assert "ads.csv was accepted: this page follows its progress." in response.content.decode()
    bulk_job_execute(job_id=job.id)
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert 'data-status="succeeded"' in page and "queued" not in page.lower().split("<footer")[0]
