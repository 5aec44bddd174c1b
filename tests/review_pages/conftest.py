"""What the review pages' tests share: items waiting for review, a logged-in client, the item
on the card and the one at the head of the queue."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.models import ReviewItem
from annotations.services.review.inputs import inputs_submit

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def items(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Barista", "icu staff nurse"], source="api"
    )


@pytest.fixture
def many_items(tiny_taxonomy):
    """Sixty pending items over several groups: enough to catch a query per item."""
    texts = [f"Java Developer {n}" for n in range(30)]
    texts += [f"Staff Nurse {n}" for n in range(15)]
    texts += [f"Coffee Maker {n}" for n in range(15)]
    return inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")


def head() -> ReviewItem:
    return ReviewItem.objects.order_by("-priority", "id").first()


def card_item_id(html: str) -> int:
    return int(re.search(r'data-testid="review-card" data-item-id="(\d+)"', html).group(1))


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def answer_changed_by_a_new_model(taxonomy):
    """Three open items; the third ("Tax Clerk") answered Baristas by an older version, so the
    live one, predicting again, changes its answer. Returns (that item, Baristas)."""
    from annotations.models import Group, Prediction
    from models_app.models import ModelVersion

    items = inputs_submit(
        taxonomy=taxonomy, texts=["icu nurse", "Java Engineer", "Tax Clerk"], source="api"
    )
    changed = items[2]
    live = changed.prediction.model_version
    older = ModelVersion.objects.create(
        taxonomy=taxonomy, number=99, encoder_kind=live.encoder_kind, artifact_path="x"
    )
    baristas = Group.objects.get(taxonomy=taxonomy, code="35-3023")
    Prediction.objects.filter(id=changed.prediction_id).update(model_version=older)
    ReviewItem.objects.filter(id=changed.id).update(top_group=baristas)
    return changed, baristas
