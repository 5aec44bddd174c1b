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
