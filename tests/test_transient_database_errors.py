"""A database that cannot answer in time (a lock held elsewhere, SQLite's "database is locked")
refuses the request with a 503 and Retry-After, stores nothing, and the retry with the same
idempotency key is recorded once."""

from __future__ import annotations

import contextlib

import psycopg
import pytest
from django.db import connection
from django.test import Client

from annotations.models import Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def item(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    return item


@contextlib.contextmanager
def locked_elsewhere(item: ReviewItem):
    """The item's row locked by another session, and this one giving up on a lock after 200 ms."""
    if connection.vendor != "postgresql":
        pytest.fail("this test needs PostgreSQL: set DATABASE_URL (make services)")
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"],
        dbname=db["NAME"],
    ) as other:
        other.execute("SELECT id FROM annotations_reviewitem WHERE id = %s FOR UPDATE", [item.id])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        yield
        other.rollback()
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")


def test_an_api_verdict_that_cannot_get_its_lock_is_a_503_and_its_retry_is_stored_once(
    api_client, item
):
    body = {"review_item": item.id, "verdict": "confirm"}
    with locked_elsewhere(item):
        refused = api_client.post(
            "/api/v1/judgements", body, format="json", HTTP_IDEMPOTENCY_KEY="k"
        )

        assert refused.status_code == 503
        assert refused["Content-Type"] == "application/json"
        assert refused["Retry-After"] == "2"
        assert "nothing was stored" in refused.json()["detail"]
        assert not Judgement.objects.exists()

    retried = api_client.post("/api/v1/judgements", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    again = api_client.post("/api/v1/judgements", body, format="json", HTTP_IDEMPOTENCY_KEY="k")

    assert (retried.status_code, again.status_code) == (201, 200)
    assert Judgement.objects.filter(idempotency_key="k").count() == 1
    assert ReviewItem.objects.get(id=item.id).status == ReviewItem.Status.DONE


def test_a_review_page_verdict_that_cannot_get_its_lock_is_a_503(curator, item):
    client = Client(raise_request_exception=False)
    client.force_login(curator)
    assert client.get("/review/").status_code == 200  # the page claims the card first
    verdict = {"verdict": "confirm", "prediction_id": item.prediction_id, "idempotency_key": "p1"}

    with locked_elsewhere(item):
        response = client.post(f"/review/items/{item.id}/judge", verdict, HTTP_HX_REQUEST="true")

        assert response.status_code == 503
        assert response["Retry-After"] == "2"
        assert not Judgement.objects.exists()

    retried = client.post(f"/review/items/{item.id}/judge", verdict, HTTP_HX_REQUEST="true")
    assert retried.status_code == 200
    assert Judgement.objects.filter(idempotency_key="p1").count() == 1
