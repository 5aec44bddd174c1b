"""Cards leased: a curator claims the next item worth a look (or a group's batch), holds it
for ``SIAMWEB_REVIEW_LEASE_SECONDS`` so nobody else judges it, and gives it back."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from annotations.models import (
    Group,
    ReviewItem,
    Taxonomy,
)
from annotations.selectors.queue import QueueFilters, review_batch_queue, review_queue


def lease_expiry():
    return timezone.now() + timedelta(seconds=settings.SIAMWEB_REVIEW_LEASE_SECONDS)


def _free_for(user, now) -> Q:
    return Q(leased_by__isnull=True) | Q(lease_expires_at__lte=now) | Q(leased_by=user)


def review_item_claim(*, user, filters: QueueFilters | None = None) -> ReviewItem | None:
    """Lease the next card worth a look to ``user``; None when nothing is left for them.

    The card the curator already holds comes back first, so a reload shows the same card; of
    several, the one leased last (a verdict taken back from the input's page is leased to its
    curator to judge again, whatever card they held). The claim is a conditional update, so
    two curators asking at once never get the same item.
    """
    filters = filters or QueueFilters()
    held = (
        review_queue(filters=filters, user=user)
        .filter(leased_by=user, lease_expires_at__gt=timezone.now())
        .order_by("-lease_expires_at", "-priority", "id")
        .first()
    )
    if held is not None:
        ReviewItem.objects.filter(id=held.id).update(lease_expires_at=lease_expiry())
        return _card(held.id)
    for status in filters.statuses_in_order():
        item = _claim_first(
            user=user, queue=review_queue(filters=filters, user=user, status=status)
        )
        if item is not None:
            return item
    return None


def _claim_first(*, user, queue) -> ReviewItem | None:
    for _attempt in range(5):
        candidate = queue.filter(_free_for(user, timezone.now())).values_list("id", flat=True)
        candidate = candidate.first()
        if candidate is None:
            return None
        claimed = (
            ReviewItem.objects.filter(id=candidate)
            .filter(_free_for(user, timezone.now()))
            .update(leased_by=user, lease_expires_at=lease_expiry())
        )
        if claimed:
            return _card(candidate)
    # Lost five races in a row: others are draining this part of the queue; the caller retries.
    return None


def review_items_claim_for_group(
    *, user, taxonomy: Taxonomy, group: Group, limit: int = 48
) -> list[ReviewItem]:
    """Lease up to ``limit`` pending items predicted for ``group`` to ``user``, for batch review.

    Which items: ``review_batch_queue`` (the one the groups list counts). Items another curator
    holds are left out; the ones this curator already holds stay in.
    """
    now = timezone.now()
    queue = review_batch_queue(user=user, taxonomy=taxonomy, group=group)
    ids = list(queue.values_list("id", flat=True)[:limit])
    ReviewItem.objects.filter(id__in=ids).filter(_free_for(user, now)).update(
        leased_by=user, lease_expires_at=lease_expiry()
    )
    return list(
        ReviewItem.objects.filter(id__in=ids, leased_by=user)
        .select_related("input", "prediction")
        .order_by("-priority", "id")
    )


def review_item_release(*, item: ReviewItem, user) -> None:
    """Give a held card back to the queue."""
    ReviewItem.objects.filter(id=item.id, leased_by=user).update(
        leased_by=None, lease_expires_at=None
    )


def _card(item_id: int) -> ReviewItem:
    return ReviewItem.objects.select_related(
        "input__taxonomy", "prediction__model_version__taxonomy", "top_group"
    ).get(id=item_id)
