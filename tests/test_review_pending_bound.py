"""One user's sends (API, uploads, the playground, bulk jobs) may have at most
SIAMWEB_REVIEW_PENDING_PER_USER review items waiting: a send past it is refused with a 409 that
says how many wait, storing nothing, and a bulk job's rows past it are counted, not queued. Each
bulk job capped its own rows, but two jobs of one user once queued 4,121."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotations.models import Input, ReviewItem
from annotations.services.review.inputs import ReviewQueueFull, inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute

URL = "/api/v1/taxonomies/jobs/inputs"


@pytest.fixture(autouse=True)
def _three_waiting(settings):
    settings.SIAMWEB_REVIEW_PENDING_PER_USER = 3


def waiting(user) -> int:
    return ReviewItem.objects.filter(queued_by=user, status__in=ReviewItem.OPEN_STATUSES).count()


def test_a_send_past_the_bound_is_a_409_that_stores_nothing(api_client, curator, tiny_taxonomy):
    assert api_client.post(URL, {"texts": ["Nurse", "Welder"]}, format="json").status_code == 201
    before = Input.objects.count()
    refused = api_client.post(URL, {"texts": ["Baker", "Pilot"]}, format="json")
    assert refused.status_code == 409
    (message,) = refused.json()["texts"]
    assert message.startswith("2 items you sent are waiting for review and 2 more would pass")
    assert "SIAMWEB_REVIEW_PENDING_PER_USER" in message and "nothing was stored" in message
    assert Input.objects.count() == before and waiting(curator) == 2
    # Texts already waiting are not new: sending them again takes no room.
    again = api_client.post(URL, {"texts": ["Nurse", "Welder", "Baker"]}, format="json")
    assert again.status_code == 201
    assert waiting(curator) == 3


def test_the_bound_is_each_users_own(api_client, curator, other_curator, tiny_taxonomy):
    api_client.post(URL, {"texts": ["Nurse", "Welder", "Baker"]}, format="json")
    (item,) = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Pilot"], source="api", queued_by=other_curator
    )
    assert item.queued_by == other_curator
    with pytest.raises(ReviewQueueFull):
        inputs_submit(taxonomy=tiny_taxonomy, texts=["Driver"], source="api", queued_by=curator)


def test_a_verdict_makes_room(api_client, curator, tiny_taxonomy):
    api_client.post(URL, {"texts": ["Nurse", "Welder", "Baker"]}, format="json")
    assert api_client.post(URL, {"texts": ["Pilot"]}, format="json").status_code == 409
    item = ReviewItem.objects.get(input__text="Nurse")
    judgement_create(review_item=item, user=curator, verdict="none")
    assert api_client.post(URL, {"texts": ["Pilot"]}, format="json").status_code == 201


def test_an_upload_past_the_bound_is_refused_whole(client, curator, tiny_taxonomy):
    client.force_login(curator)
    upload = SimpleUploadedFile("titles.txt", b"Nurse\nWelder\nBaker\nPilot\n")
    page = client.post("/inputs/upload/", {"taxonomy": "jobs", "file": upload})
    assert page.status_code == 409
    assert "0 items you sent are waiting for review and 4 more would pass" in page.content.decode()
    assert not Input.objects.exists()


def test_the_playground_says_so_at_the_bound(client, curator, tiny_taxonomy):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Nurse", "Welder", "Baker"], source="api", queued_by=curator
    )
    client.force_login(curator)
    page = client.post("/playground/send", {"taxonomy": "jobs", "text": "Pilot"})
    assert page.status_code == 409
    assert "3 items you sent are waiting for review" in page.content.decode()
    assert not Input.objects.filter(text="Pilot").exists()


def bulk_job(taxonomy, user, titles: list[str]):
    data = "title\n" + "".join(f"{title}\n" for title in titles)
    job = bulk_job_create(
        taxonomy=taxonomy,
        upload=io.BytesIO(data.encode()),
        filename="titles.csv",
        column="title",
        review_below=1.0,
        user=user,
        enqueue=False,
    )
    return bulk_job_execute(job_id=job.id, chunk_rows=2)


def test_two_bulk_jobs_of_one_user_queue_no_more_than_the_bound(curator, tiny_taxonomy, settings):
    settings.SIAMWEB_REVIEW_PENDING_PER_USER = 5
    first = bulk_job(tiny_taxonomy, curator, [f"night nurse {n}" for n in range(4)])
    second = bulk_job(tiny_taxonomy, curator, [f"java barista {n}" for n in range(4)])
    assert (first.rows_queued, first.rows_not_queued) == (4, 0)
    assert (second.rows_queued, second.rows_not_queued) == (1, 3)
    assert waiting(curator) == 5
    assert second.status == "succeeded" and second.rows_done == 4
