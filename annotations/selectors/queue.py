"""The review queue: its filters, its order, its pages, the batch queue and the conflicts."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Count,
    Exists,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
)
from django.utils import timezone

from annotations.models import (
    Group,
    Judgement,
    ReviewItem,
    Taxonomy,
)


@dataclass(frozen=True)
class QueueFilters:
    """What a curator narrows the queue to. ``status`` None means every open item, then the
    skipped ones once those are done."""

    taxonomy: Taxonomy | None = None
    group: Group | None = None
    score_min: float | None = None
    score_max: float | None = None
    status: str | None = None
    include_skipped: bool = True
    bulk_job_id: int | None = None  # the items that bulk job sent for review

    def statuses_in_order(self) -> list[str]:
        """One status per pass, so each pass is an index scan in priority order. Items left
        waiting for the right group after a false match come first: they are half done."""
        if self.status:
            return [self.status]
        order = [ReviewItem.Status.AWAITING_GROUP, ReviewItem.Status.PENDING]
        return [*order, ReviewItem.Status.SKIPPED] if self.include_skipped else order


def review_queue(
    *, filters: QueueFilters, user=None, status: str | None = None
) -> QuerySet[ReviewItem]:
    """Items matching ``filters``, most worth a look first; with ``user``, less the items that
    curator already judged (double review asks a *second* curator)."""
    statuses = [status] if status else filters.statuses_in_order()
    items = ReviewItem.objects.filter(status__in=statuses)
    taxonomy = filters.group.taxonomy if filters.group is not None else filters.taxonomy
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    if filters.group is not None:
        items = items.filter(top_group=filters.group)
    if filters.bulk_job_id is not None:
        items = items.filter(bulk_job_id=filters.bulk_job_id)
    if filters.score_min is not None:
        items = items.filter(top_score__gte=filters.score_min)
    if filters.score_max is not None:
        items = items.filter(top_score__lte=filters.score_max)
    if user is not None:
        judged = Judgement.objects.live().filter(
            review_item=OuterRef("pk"), user=user, verdict__in=Judgement.FINAL_VERDICTS
        )
        items = items.exclude(Exists(judged))
    return items.order_by("-priority", "id")


def review_queue_page(
    *, filters: QueueFilters, user=None, after: tuple[float, int] | None = None, limit: int = 50
) -> list[ReviewItem]:
    """One page of one status of the queue (pending unless the filters say otherwise),
    keyset-paginated on (priority, id): a deep page costs what the first one does."""
    items = review_queue(
        filters=filters, user=user, status=filters.status or ReviewItem.Status.PENDING
    )
    if after is not None:
        priority, item_id = after
        # ``priority <= p`` on its own lets PostgreSQL start the index scan at the cursor; the OR
        # alone would be a filter, and a deep page would walk every row before it.
        items = items.filter(priority__lte=priority).filter(
            Q(priority__lt=priority) | Q(id__gt=item_id)
        )
    return list(items.select_related("input", "top_group", "leased_by", "prediction")[:limit])


def review_batch_queue(*, user, taxonomy: Taxonomy, group: Group | None = None):
    """The pending items ``user`` can judge in batch review now (of ``group``, or of every group
    of the taxonomy), most worth a look first.

    The groups list counts these, the batch page counts and leases them: one definition, so the
    two pages cannot disagree. Left out: items another curator holds, items ``user`` already
    judged (double review waits for someone else), and items whose predicted group was rejected
    in a way that counts for ``user`` (see ``rejected_groups_for``): neither verdict of a batch
    could be recorded on those, so they are the single card's to settle.
    """
    now = timezone.now()
    items = review_queue(
        filters=QueueFilters(
            taxonomy=taxonomy, group=group, status=ReviewItem.Status.PENDING, include_skipped=False
        ),
        user=user,
    ).exclude(top_group=None)
    items = items.filter(
        Q(leased_by__isnull=True) | Q(lease_expires_at__lte=now) | Q(leased_by=user)
    )
    rejected_here = Judgement.objects.live().filter(
        review_item=OuterRef("pk"), rejected_group=OuterRef("top_group")
    )
    return items.exclude(Exists(rejected_here.filter(user=user))).exclude(
        Exists(rejected_here), reviews_required__lte=1
    )


def review_groups_pending(*, taxonomy: Taxonomy, user, limit: int = 100) -> list[dict]:
    """Groups with the most items ``user`` can batch-review now: where batch review pays most."""
    rows = (
        review_batch_queue(user=user, taxonomy=taxonomy)
        .order_by()
        .values("top_group")
        .annotate(pending=Count("id"))
        .order_by("-pending", "top_group")[:limit]
    )
    groups = Group.objects.in_bulk([row["top_group"] for row in rows])
    return [{"group": groups[row["top_group"]], "pending": row["pending"]} for row in rows]


def review_conflicts(*, taxonomy: Taxonomy | None = None) -> QuerySet[ReviewItem]:
    items = ReviewItem.objects.filter(conflict=True)
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    return items.select_related("input", "taxonomy").prefetch_related(
        Prefetch(
            "judgements",
            queryset=Judgement.objects.live()
            .filter(verdict__in=Judgement.FINAL_VERDICTS)
            .select_related("user", "group"),
            to_attr="final_judgements",
        )
    )
