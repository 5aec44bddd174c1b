"""Reads for the review pages and the API."""

from __future__ import annotations

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from annotations.models import Group, Judgement, ReviewItem, Taxonomy


def taxonomy_get(slug: str) -> Taxonomy | None:
    return Taxonomy.objects.filter(slug=slug).first()


def review_queue(*, taxonomy: Taxonomy | None = None) -> QuerySet[ReviewItem]:
    """Open items, most worth a look first; skipped items come back once the rest are done."""
    items = ReviewItem.objects.filter(
        status__in=[*ReviewItem.OPEN_STATUSES, ReviewItem.Status.SKIPPED]
    )
    if taxonomy is not None:
        items = items.filter(input__taxonomy=taxonomy)
    return items.annotate(
        skipped=Case(
            When(status=ReviewItem.Status.SKIPPED, then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        )
    ).order_by("skipped", "-priority", "id")


def review_item_next(*, taxonomy: Taxonomy | None = None) -> ReviewItem | None:
    return (
        review_queue(taxonomy=taxonomy)
        .select_related("input__taxonomy", "prediction__model_version__taxonomy")
        .first()
    )


def review_card_groups(item: ReviewItem) -> list[dict]:
    """The prediction's ranked groups, less those a curator already rejected for this input."""
    rejected = set(
        Judgement.objects.filter(review_item=item, rejected_group__isnull=False).values_list(
            "rejected_group_id", flat=True
        )
    )
    return [g for g in item.prediction.ranked_groups if g["group_id"] not in rejected]


def review_counts(*, taxonomy: Taxonomy | None = None) -> dict[str, int]:
    items = ReviewItem.objects.all()
    if taxonomy is not None:
        items = items.filter(input__taxonomy=taxonomy)
    open_statuses = [*ReviewItem.OPEN_STATUSES, ReviewItem.Status.SKIPPED]
    return {
        "open": items.filter(status__in=open_statuses).count(),
        "done": items.filter(status=ReviewItem.Status.DONE).count(),
    }


def recent_judgements(*, user, limit: int = 10) -> QuerySet[Judgement]:
    return (
        Judgement.objects.filter(user=user)
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
