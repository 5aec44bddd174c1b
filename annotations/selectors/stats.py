"""Counts of the review: the queue's by status, and each curator's verdicts and agreement."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db.models import (
    Count,
    Q,
)
from django.db.models.functions import TruncDate
from django.utils import timezone

from annotations.models import (
    Judgement,
    ReviewItem,
    Taxonomy,
)
from annotations.selectors.queue import QueueFilters


def review_counts(*, filters: QueueFilters | None = None) -> dict[str, int]:
    """How many items are open, skipped, done and in conflict, within the filters' taxonomy."""
    filters = filters or QueueFilters()
    items = ReviewItem.objects.all()
    taxonomy = filters.group.taxonomy if filters.group is not None else filters.taxonomy
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    if filters.group is not None:
        items = items.filter(top_group=filters.group)
    if filters.bulk_job_id is not None:
        items = items.filter(bulk_job_id=filters.bulk_job_id)
    by_status = dict(
        items.order_by().values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return {
        "open": sum(by_status.get(s, 0) for s in ReviewItem.OPEN_STATUSES),
        "skipped": by_status.get(ReviewItem.Status.SKIPPED, 0),
        "done": by_status.get(ReviewItem.Status.DONE, 0),
        "conflicts": items.filter(conflict=True).count(),
    }


def curator_stats(*, taxonomy: Taxonomy | None = None) -> list[dict]:
    """Per curator: live verdicts (today, the last seven days, a day on the days they worked),
    items also judged by someone else and the share of those where both put the input in the
    same place, the share of their verdicts taken back since (undone or changed), and how many
    an admin's settlement of a conflict overruled. An overruled verdict still says what its
    curator judged, so a settled disagreement stays one; the admin's settlement is no third
    curator."""
    every = Judgement.objects.all()
    if taxonomy is not None:
        every = every.filter(review_item__taxonomy=taxonomy)
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    standing = Q(undone_at__isnull=True)
    figures = {
        row["user__username"]: row
        for row in every.order_by()
        .values("user__username")
        .annotate(
            given=Count("id"),
            verdicts=Count("id", filter=standing),
            today=Count("id", filter=standing & Q(created_at__gte=today)),
            week=Count("id", filter=standing & Q(created_at__gte=today - timedelta(days=6))),
            days=Count(TruncDate("created_at"), distinct=True, filter=standing),
            taken_back=Count(
                "id",
                filter=Q(undone_at__isnull=False) & ~Q(settlement=Judgement.Settlement.OVERRULED),
            ),
            overruled=Count("id", filter=Q(settlement=Judgement.Settlement.OVERRULED)),
        )
        if row["verdicts"] or row["overruled"]
    }
    said = every.filter(
        Q(undone_at__isnull=True) | Q(settlement=Judgement.Settlement.OVERRULED)
    ).exclude(settlement=Judgement.Settlement.SETTLED)
    shared_items = (
        said.filter(verdict__in=Judgement.FINAL_VERDICTS)
        .order_by()
        .values("review_item")
        .annotate(curators=Count("user", distinct=True))
        .filter(curators__gte=2)
        .values("review_item")
    )
    outcomes: dict[int, dict[str, object]] = defaultdict(dict)
    # Oldest first: where a curator judged an item again after it reopened, the later stands.
    for item_id, username, verdict, group_id in (
        said.filter(review_item__in=shared_items, verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("created_at", "id")
        .values_list("review_item", "user__username", "verdict", "group")
    ):
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
            "verdicts": row["verdicts"],
            "today": row["today"],
            "last_7_days": row["week"],
            "per_day": row["verdicts"] / max(row["days"], 1),
            "reversal_rate": row["taken_back"] / row["given"],
            "overruled": row["overruled"],
            "seen_twice": seen_twice[username],
            "agreement": (agreed[username] / seen_twice[username])
            if seen_twice[username]
            else None,
        }
        for username, row in sorted(figures.items())
    ]


def inputs_judged_today_count(*, user) -> int:
    """The inputs the curator put somewhere since local midnight, by verdicts that still stand:
    a false match and the group picked after it are one input, a skip is none."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return (
        Judgement.objects.live()
        .filter(user=user, created_at__gte=midnight, verdict__in=Judgement.FINAL_VERDICTS)
        .values("review_item")
        .distinct()
        .count()
    )
