"""Curators' flags on review items."""

from __future__ import annotations

from django.db.models import (
    QuerySet,
)

from annotations.models import (
    ReviewFlag,
)


def review_flags(*, kind: str | None = None, resolved: bool | None = False) -> QuerySet[ReviewFlag]:
    """Curators' flags, newest first: open ones only by default (``resolved=None``: all)."""
    flags = ReviewFlag.objects.select_related(
        "review_item__input",
        "review_item__taxonomy",
        "review_item__top_group",
        "user",
        "resolved_by",
    )
    if kind:
        flags = flags.filter(kind=kind)
    if resolved is not None:
        flags = flags.filter(resolved_at__isnull=not resolved)
    return flags.order_by("-id")
