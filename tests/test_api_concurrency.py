"""Two curators working one queue at the same time, over the API, each in its own thread with
its own database connection: every item is claimed and judged exactly once."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from django.db import connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import FeedbackPair, Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit
from models_app.models import TrainingRun
from models_app.training.services.runs import training_run_request

API = "/api/v1"
TEXTS = [
    f"{seniority} {title}"
    for seniority in ("Senior", "Junior", "Lead", "Trainee")
    for title in ("Java Developer", "ICU Nurse", "Barista", "Truck Driver", "Tax Accountant")
]
# Far more rounds than items: a thread that loops this often has stopped making progress.
MAX_ROUNDS = 10 * len(TEXTS)


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def work_the_queue(client: APIClient, claimed: list[int], judged: list[int], errors: list) -> None:
    """Claim, confirm, repeat until the queue answers 204."""
    try:
        for _round in range(MAX_ROUNDS):
            claim = client.post(f"{API}/review-items/claim", format="json")
            if claim.status_code == 204:
                return
            assert claim.status_code == 200, claim.content
            card = claim.json()
            claimed.append(card["id"])
            verdict = client.post(
                f"{API}/judgements",
                {
                    "review_item": card["id"],
                    "verdict": "confirm",
                    "prediction": card["prediction"]["id"],
                },
                format="json",
                HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
            )
            assert verdict.status_code == 201, verdict.content
            judged.append(verdict.json()["review_item"])
        errors.append(f"still claiming after {MAX_ROUNDS} rounds")
    except Exception as exc:  # reported by the main thread, which owns the assertions
        errors.append(exc)
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_two_curators_drain_one_queue_without_judging_any_item_twice(
    tiny_taxonomy, curator, other_curator
):
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    assert len(items) == len(TEXTS)
    # A reindex already queued: the verdicts' own requests for one find it and add none, so
    # nothing is sent to a broker from this test.
    training_run_request(taxonomy=tiny_taxonomy, kind=TrainingRun.Kind.REINDEX, enqueue=False)
    work = {
        user.username: {"client": client_for(user), "claimed": [], "judged": [], "errors": []}
        for user in (curator, other_curator)
    }
    threads = [
        threading.Thread(
            target=work_the_queue,
            args=(state["client"], state["claimed"], state["judged"], state["errors"]),
        )
        for state in work.values()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [state["errors"] for state in work.values()] == [[], []]
    carla, oscar = work["carla"], work["oscar"]
    every_item = {item.id for item in items}
    # Each item claimed by exactly one curator, once, and judged by that curator.
    assert Counter(carla["claimed"] + oscar["claimed"]) == Counter(every_item)
    assert carla["judged"] == carla["claimed"]
    assert oscar["judged"] == oscar["claimed"]
    # No item has two verdicts, and the totals add up.
    per_item = Counter(Judgement.objects.values_list("review_item_id", flat=True))
    assert per_item == Counter(every_item)
    per_user = Counter(Judgement.objects.values_list("user__username", flat=True))
    assert (per_user["carla"], per_user["oscar"]) == (len(carla["judged"]), len(oscar["judged"]))
    assert per_user.total() == len(TEXTS)
    assert FeedbackPair.objects.filter(origin="confirm").count() == len(TEXTS)
    assert set(ReviewItem.objects.values_list("status", flat=True)) == {"done"}
    assert not ReviewItem.objects.filter(leased_by__isnull=False).exists()
