"""Queries the API needs beside ``annotations.selectors``: lists with their counts and the
related rows each answer shows, read in a fixed number of queries."""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Length
from rest_framework.exceptions import NotFound

from annotations.models import (
    Group,
    Judgement,
    Member,
    ReviewItem,
    Taxonomy,
)
from annotations.selectors.queue import QueueFilters
from annotations.selectors.stats import review_counts
from siamweb.web.api import object_or_404


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


def groups_queryset(taxonomy: Taxonomy, query: str = "") -> QuerySet[Group]:
    """The taxonomy's groups by code; with ``query`` those whose name or code has every word
    (a name holding it, or a code starting with it), shortest names first."""
    groups = Group.objects.filter(taxonomy=taxonomy).select_related("taxonomy")
    words = query.split()
    if not words:
        return groups.annotate(member_count=_member_count()).order_by("code")
    for word in words[:6]:
        groups = groups.filter(Q(name__icontains=word) | Q(code__istartswith=word))
    return groups.annotate(member_count=_member_count()).order_by(Length("name"), "name", "id")


def group_or_404(pk: int) -> Group:
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


def taxonomies() -> QuerySet[Taxonomy]:
    return Taxonomy.objects.select_related("deployment__index_build__model_version__taxonomy")


def taxonomy_with_counts(slug: str) -> Taxonomy:
    taxonomy = taxonomies().filter(slug=slug).first()
    if taxonomy is None:
        raise NotFound(f"no taxonomy {slug!r}")
    taxonomy.counts = _taxonomy_counts(taxonomy)
    return taxonomy


def members_queryset() -> QuerySet[Member]:
    return Member.objects.select_related("taxonomy", "group", "added_by")


def review_items() -> QuerySet[ReviewItem]:
    return ReviewItem.objects.select_related("taxonomy", "input", "top_group", "leased_by")


def review_item_cards(ids: list[int]) -> list[ReviewItem]:
    """The items with their predictions, in the order of ``ids``."""
    items = review_items().select_related("prediction__model_version__taxonomy").in_bulk(ids)
    return [items[item_id] for item_id in ids]


def review_item_card(pk: int) -> ReviewItem:
    items = review_items().select_related("prediction__model_version__taxonomy")
    return object_or_404(items, pk, "review item")


def judgements_queryset() -> QuerySet[Judgement]:
    return Judgement.objects.select_related("user", "group", "rejected_group")


def item_judgements(item: ReviewItem) -> list[Judgement]:
    return list(judgements_queryset().filter(review_item=item).order_by("created_at", "id"))
