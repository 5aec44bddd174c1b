"""Queries the API needs beside ``annotations.selectors``: lists with their counts and the
related rows each answer shows, read in a fixed number of queries."""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Length
from rest_framework.exceptions import NotFound

from annotations.api.base import object_or_404
from annotations.models import (
    Group,
    Judgement,
    Member,
    ReviewItem,
    Taxonomy,
)
from annotations.selectors import (
    QueueFilters,
    review_counts,
)


def _member_count() -> Coalesce:
    """Members of the row's group, counted per row returned (not for the whole table)."""
    members = (
        Member.objects.filter(group=OuterRef("pk"))
        .order_by()
        .values("group")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(members, output_field=IntegerField()), Value(0))


def _groups(taxonomy: Taxonomy, query: str = "") -> QuerySet[Group]:
    """The taxonomy's groups by code; with ``query`` those whose name or code has every word
    (as ``group_search`` matches them), shortest names first."""
    groups = Group.objects.filter(taxonomy=taxonomy).select_related("taxonomy")
    words = query.split()
    if not words:
        return groups.annotate(member_count=_member_count()).order_by("code")
    for word in words[:6]:
        groups = groups.filter(Q(name__icontains=word) | Q(code__istartswith=word))
    return groups.annotate(member_count=_member_count()).order_by(Length("name"), "name", "id")


def _group(pk: int) -> Group:
    groups = Group.objects.select_related("taxonomy").annotate(member_count=_member_count())
    return object_or_404(groups, pk, "group")


def _taxonomy_counts(taxonomy: Taxonomy) -> dict[str, int]:
    review = review_counts(filters=QueueFilters(taxonomy=taxonomy))
    return {
        "groups": Group.objects.filter(taxonomy=taxonomy).count(),
        "members": Member.objects.filter(taxonomy=taxonomy).count(),
        "pending_items": review["open"],
        "skipped_items": review["skipped"],
        "done_items": review["done"],
        "conflicts": review["conflicts"],
    }


def _taxonomies() -> QuerySet[Taxonomy]:
    return Taxonomy.objects.select_related("deployment__index_build__model_version__taxonomy")


def _taxonomy_with_counts(slug: str) -> Taxonomy:
    taxonomy = _taxonomies().filter(slug=slug).first()
    if taxonomy is None:
        raise NotFound(f"no taxonomy {slug!r}")
    taxonomy.counts = _taxonomy_counts(taxonomy)
    return taxonomy


def _members() -> QuerySet[Member]:
    return Member.objects.select_related("taxonomy", "group", "added_by")


def _review_items() -> QuerySet[ReviewItem]:
    return ReviewItem.objects.select_related("taxonomy", "input", "top_group", "leased_by")


def _review_item_cards(ids: list[int]) -> list[ReviewItem]:
    """The items with their predictions, in the order of ``ids``."""
    items = _review_items().select_related("prediction__model_version__taxonomy").in_bulk(ids)
    return [items[item_id] for item_id in ids]


def _review_item_card(pk: int) -> ReviewItem:
    items = _review_items().select_related("prediction__model_version__taxonomy")
    return object_or_404(items, pk, "review item")


def _judgements() -> QuerySet[Judgement]:
    return Judgement.objects.select_related("user", "group", "rejected_group")


def _item_judgements(item: ReviewItem) -> list[Judgement]:
    return list(_judgements().filter(review_item=item).order_by("created_at", "id"))
