"""Reads for the review pages and the API."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet

from annotations.models import Group, Judgement, ReviewItem, Taxonomy


def taxonomy_get(slug: str) -> Taxonomy | None:
    return Taxonomy.objects.filter(slug=slug).first()


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
        items = items.filter(Q(priority__lt=priority) | Q(priority=priority, id__gt=item_id))
    return list(items.select_related("input", "top_group", "leased_by")[:limit])


def rejected_groups_for(item: ReviewItem, *, user=None) -> set[int]:
    """Groups already rejected for this item's input. On an item sampled for double review,
    only ``user``'s own rejections count, so the second curator judges independently."""
    judgements = Judgement.objects.live().filter(review_item=item, rejected_group__isnull=False)
    if item.reviews_required > 1 and user is not None:
        judgements = judgements.filter(user=user)
    return set(judgements.values_list("rejected_group_id", flat=True))


def review_card_groups(item: ReviewItem, *, user=None) -> list[dict]:
    """The prediction's ranked groups, less those already rejected for this input."""
    rejected = rejected_groups_for(item, user=user)
    return [g for g in item.prediction.ranked_groups if g["group_id"] not in rejected]


def review_counts(*, filters: QueueFilters | None = None) -> dict[str, int]:
    """How many items are open, skipped, done and in conflict, within the filters' taxonomy."""
    filters = filters or QueueFilters()
    items = ReviewItem.objects.all()
    taxonomy = filters.group.taxonomy if filters.group is not None else filters.taxonomy
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    if filters.group is not None:
        items = items.filter(top_group=filters.group)
    by_status = dict(
        items.order_by().values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return {
        "open": sum(by_status.get(s, 0) for s in ReviewItem.OPEN_STATUSES),
        "skipped": by_status.get(ReviewItem.Status.SKIPPED, 0),
        "done": by_status.get(ReviewItem.Status.DONE, 0),
        "conflicts": items.filter(conflict=True).count(),
    }


def review_groups_pending(*, taxonomy: Taxonomy, limit: int = 100) -> list[dict]:
    """Groups with the most pending items predicted for them: where batch review pays most."""
    rows = (
        ReviewItem.objects.filter(taxonomy=taxonomy, status=ReviewItem.Status.PENDING)
        .exclude(top_group=None)
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


def curator_stats(*, taxonomy: Taxonomy | None = None) -> list[dict]:
    """Per curator: live verdicts, items also judged by someone else, and the share of those
    where both put the input in the same place."""
    judgements = Judgement.objects.live()
    if taxonomy is not None:
        judgements = judgements.filter(review_item__taxonomy=taxonomy)
    counts = dict(judgements.order_by().values_list("user__username").annotate(n=Count("id")))
    shared_items = (
        judgements.filter(verdict__in=Judgement.FINAL_VERDICTS)
        .order_by()
        .values("review_item")
        .annotate(curators=Count("user", distinct=True))
        .filter(curators__gte=2)
        .values("review_item")
    )
    outcomes: dict[int, dict[str, object]] = defaultdict(dict)
    for item_id, username, verdict, group_id in judgements.filter(
        review_item__in=shared_items, verdict__in=Judgement.FINAL_VERDICTS
    ).values_list("review_item", "user__username", "verdict", "group"):
        outcomes[item_id][username] = "none" if verdict == Judgement.Verdict.NONE else group_id
    seen_twice: dict[str, int] = defaultdict(int)
    agreed: dict[str, int] = defaultdict(int)
    for per_user in outcomes.values():
        unanimous = len(set(per_user.values())) == 1
        for username in per_user:
            seen_twice[username] += 1
            agreed[username] += unanimous
    return [
        {
            "username": username,
            "verdicts": counts[username],
            "seen_twice": seen_twice[username],
            "agreement": (agreed[username] / seen_twice[username])
            if seen_twice[username]
            else None,
        }
        for username in sorted(counts)
    ]


def recent_judgements(*, user, limit: int = 10) -> QuerySet[Judgement]:
    """The curator's latest verdicts that still count: shown beside the card, undoable."""
    return (
        Judgement.objects.live()
        .filter(user=user)
        .select_related("review_item__input", "group", "rejected_group")
        .order_by("-created_at")[:limit]
    )


def group_search(*, taxonomy: Taxonomy, query: str, limit: int = 10) -> list[Group]:
    """Groups whose name or code contains every word of ``query``, shortest names first."""
    words = query.split()
    if not words:
        return []
    groups = Group.objects.filter(taxonomy=taxonomy)
    for word in words[:6]:
        groups = groups.filter(Q(name__icontains=word) | Q(code__istartswith=word))
    return sorted(groups[:200], key=lambda g: (len(g.name), g.name))[:limit]
