"""The review queue ordered again after the live ranker changed: what a verdict teaches most
moves with what the ranker has learnt (``models_app/siamese/ranker/active.py``).

Each open item is ranked again by the live ranker (no prediction is stored: the card keeps the
answer it was predicted with) and gets the priority ``review_priority`` gives, spread so that
near-copies of one title, predicted into one group, do not come in a row. The cost is bounded:
at most ``SIAMWEB_REORDER_MAX_ITEMS`` items a time, three quarters of them the head of the
queue (where curators take cards from) and a quarter those ordered longest ago, so a queue of
any length is ordered again in full over a few refits. Priorities are computed first and
written in one statement at the end: an order interrupted half-way leaves the last one whole.
"""

from __future__ import annotations

from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from annotations.models import ReviewItem, Taxonomy
from annotations.services.review.inputs import review_priorities_spread
from models_app.serving.normalize import rank_taxonomy_groups

# Texts a normalize call ranks at once while ordering: the served path's batch size.
_CHUNK = 500


class ItemToReorder(NamedTuple):
    id: int
    text: str
    occurrences: int
    changed: bool  # a new model version changed its answer while nobody had judged it
    audit: bool  # drawn to audit an auto-coded answer: its place is drawn at random


def review_items_to_reorder(*, taxonomy: Taxonomy, limit: int) -> list[ItemToReorder]:
    """The open items ordered again this time: the head of the queue, then those ordered
    longest ago (``updated_at``), ``limit`` in all. Read as plain values: building 20,000
    items and their inputs as model instances took a tenth of a reorder."""
    open_items = ReviewItem.objects.filter(taxonomy=taxonomy, status__in=ReviewItem.OPEN_STATUSES)
    columns = ("id", "input__text", "input__occurrences", "changed_from_id", "audit")
    head = list(open_items.order_by("-priority", "id").values_list(*columns)[: limit - limit // 4])
    seen = [row[0] for row in head]
    rest = open_items.exclude(id__in=seen).order_by("updated_at", "id")
    rows = head + list(rest.values_list(*columns)[: limit - len(head)])
    return [
        ItemToReorder(item_id, text, occurrences, changed_from is not None, audit)
        for item_id, text, occurrences, changed_from, audit in rows
    ]


def review_items_reorder(*, taxonomy: Taxonomy, limit: int | None = None) -> int:
    """Order the taxonomy's open items again with its live ranker; how many were ordered."""
    limit = limit or settings.SIAMWEB_REORDER_MAX_ITEMS
    items = review_items_to_reorder(taxonomy=taxonomy, limit=limit)
    if not items:
        return 0
    answers = []
    texts = [item.text for item in items]
    for start in range(0, len(texts), _CHUNK):
        answers += rank_taxonomy_groups(taxonomy, texts[start : start + _CHUNK], k=2)
    priorities = review_priorities_spread(
        answers,
        [item.occurrences for item in items],
        [item.changed for item in items],
        [item.audit for item in items],
    )
    return _priorities_write([item.id for item in items], priorities.tolist())


def _priorities_write(item_ids: list[int], priorities: list[float]) -> int:
    """Write each item's new priority, stamped now, in one statement, to items still open (one
    judged meanwhile keeps what its verdict wrote); how many were written. Django's
    ``bulk_update`` built a CASE of a thousand branches per statement: half a 20,000-item
    reorder's time went to building and running it."""
    table = connection.ops.quote_name(ReviewItem._meta.db_table)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    open_statuses = [str(status) for status in ReviewItem.OPEN_STATUSES]
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {table} AS item SET priority = new.priority, updated_at = %s "
                "FROM unnest(%s::bigint[], %s::double precision[]) AS new(id, priority) "
                "WHERE item.id = new.id AND item.status = ANY(%s)",
                [now, item_ids, priorities, open_statuses],
            )
            return cursor.rowcount
        cursor.executemany(
            f"UPDATE {table} SET priority = %s, updated_at = %s "
            "WHERE id = %s AND status IN (%s, %s)",
            [(priority, now, item_id, *open_statuses)
             for item_id, priority in zip(item_ids, priorities, strict=True)],
        )  # fmt: skip
        return cursor.rowcount
