"""The review queue hands each card to one curator at a time, in priority order, with filters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotations.models import Group, ReviewItem
from annotations.selectors.queue import QueueFilters, review_queue_page
from annotations.selectors.stats import review_counts
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import (
    review_item_claim,
    review_item_release,
    review_items_claim_for_group,
)
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create

TEXTS = ["Senior Java Engineer", "ICU Staff Nurse", "Long haul truck driver", "Java Barista"]


@pytest.fixture
def items(tiny_taxonomy) -> list[ReviewItem]:
    return inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def test_two_curators_get_different_cards(items, curator, other_curator):
    first = review_item_claim(user=curator)
    second = review_item_claim(user=other_curator)
    assert first.id != second.id
    assert ReviewItem.objects.get(id=first.id).leased_by == curator
    assert ReviewItem.objects.get(id=second.id).leased_by == other_curator


def test_a_curator_asking_again_gets_the_card_they_hold(items, curator):
    first = review_item_claim(user=curator)
    assert review_item_claim(user=curator).id == first.id


def test_cards_come_in_priority_order(items, curator, other_curator):
    expected = list(ReviewItem.objects.order_by("-priority", "id").values_list("id", flat=True)[:2])
    assert review_item_claim(user=curator).id == expected[0]
    assert review_item_claim(user=other_curator).id == expected[1]


def test_an_expired_lease_lets_another_curator_take_the_card(items, curator, other_curator):
    held = review_item_claim(user=curator)
    ReviewItem.objects.filter(id=held.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # Another curator's next card is the highest-priority one again.
    assert review_item_claim(user=other_curator).id == held.id


def test_a_released_card_goes_back_to_the_queue(items, curator, other_curator):
    held = review_item_claim(user=curator)
    review_item_release(item=held, user=curator)
    assert ReviewItem.objects.get(id=held.id).leased_by is None
    assert review_item_claim(user=other_curator).id == held.id


def test_a_verdict_on_a_card_someone_else_holds_is_refused(items, curator, other_curator):
    held = review_item_claim(user=curator)
    with pytest.raises(VerdictError) as error:
        judgement_create(review_item=held, user=other_curator, verdict="confirm")
    assert (error.value.field, error.value.conflict) == ("review_item", True)
    assert not held.judgements.exists()


def test_a_verdict_releases_the_lease(items, curator):
    held = review_item_claim(user=curator)
    judgement_create(review_item=held, user=curator, verdict="skip")
    held.refresh_from_db()
    assert (held.status, held.leased_by) == (ReviewItem.Status.SKIPPED, None)


def test_the_queue_runs_dry_when_every_card_is_held(items, curator, other_curator):
    for _ in items:
        assert review_item_claim(user=curator) is not None
        # Each verdict frees the curator to claim the next card.
        judgement_create(
            review_item=ReviewItem.objects.get(leased_by=curator), user=curator, verdict="skip"
        )
    # All four are skipped now; skipped cards come back once nothing else is open.
    assert review_item_claim(user=other_curator).status == ReviewItem.Status.SKIPPED


def test_filters_narrow_the_claim_to_a_predicted_group(items, curator):
    card = review_item_claim(user=curator, filters=QueueFilters(group=group("29-1141")))
    assert card.input.text == "ICU Staff Nurse"
    assert card.top_group.code == "29-1141"


def test_filters_narrow_the_claim_to_a_score_range(items, curator):
    scores = sorted(ReviewItem.objects.values_list("top_score", flat=True))
    card = review_item_claim(user=curator, filters=QueueFilters(score_max=scores[0]))
    assert card.top_score == scores[0]
    assert review_item_claim(user=curator, filters=QueueFilters(score_min=2.0)) is None


def test_the_queue_page_is_keyset_paginated(items, curator):
    first = review_queue_page(filters=QueueFilters(), limit=3)
    rest = review_queue_page(
        filters=QueueFilters(), after=(first[-1].priority, first[-1].id), limit=3
    )
    ordered = list(ReviewItem.objects.order_by("-priority", "id").values_list("id", flat=True))
    assert [i.id for i in first + rest] == ordered


def test_batch_claim_leases_only_free_items_of_the_group(tiny_taxonomy, curator, other_curator):
    texts = ["Java Engineer", "Senior Java Engineer", "Python Engineer", "Backend Engineer"]
    inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")
    developers = group("15-1252")
    predicted = ReviewItem.objects.filter(top_group=developers).count()
    held = review_item_claim(user=other_curator, filters=QueueFilters(group=developers))
    batch = review_items_claim_for_group(user=curator, taxonomy=tiny_taxonomy, group=developers)
    assert len(batch) == predicted - 1
    assert held.id not in {item.id for item in batch}
    assert all(item.leased_by_id == curator.id for item in batch)


def test_counts_split_open_skipped_and_done(items, curator):
    judgement_create(review_item=items[0], user=curator, verdict="confirm")
    judgement_create(review_item=items[1], user=curator, verdict="skip")
    assert review_counts() == {"open": 2, "skipped": 1, "done": 1, "conflicts": 0}
