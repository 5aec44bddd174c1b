"""Curators' flags on review items (unsure, a taxonomy gap, a comment) and the admins who
settle them. A flag is not a verdict: the item, its lease and the queue are left as they are."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from annotations.models import ReviewFlag, ReviewItem
from annotations.services.audit import audit_record
from annotations.text_rule import TextError, clean_multiline_text


class FlagError(ValueError):
    """A flag that can't be stored or settled; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


@transaction.atomic
def review_flag_create(
    *, review_item: ReviewItem, user, kind: str, comment: str = ""
) -> ReviewFlag:
    """Flag ``review_item`` for the admins. A comment is optional, except on a bare comment;
    it holds what any text may (``clean_multiline_text``), line breaks and tabs included.

    The same flag sent again while the first is open (this curator, this kind, this comment once
    cleaned, on this item) stores nothing: the open one is returned with ``flag.replayed`` True.
    """
    if kind not in ReviewFlag.Kind.values:
        choices = ", ".join(ReviewFlag.Kind.values)
        raise FlagError("kind", f"unknown kind {kind!r}: one of {choices}")
    try:
        comment = clean_multiline_text(comment, max_length=ReviewFlag.COMMENT_MAX_LENGTH)
    except TextError as exc:
        raise FlagError("comment", str(exc)) from None
    if kind == ReviewFlag.Kind.COMMENT and not comment:
        raise FlagError("comment", "write the comment")
    # Flags on one item are stored one at a time (as verdicts are), so of two identical ones
    # sent together the second finds the first.
    list(ReviewItem.objects.select_for_update().filter(id=review_item.id).values_list("id"))
    open_flag = (
        ReviewFlag.objects.filter(
            review_item=review_item, user=user, kind=kind, comment=comment, resolved_at=None
        )
        .order_by("id")
        .first()
    )
    if open_flag is not None:
        open_flag.replayed = True
        return open_flag
    flag = ReviewFlag.objects.create(review_item=review_item, user=user, kind=kind, comment=comment)
    flag.replayed = False
    audit_record(
        actor=user,
        action="review_flag.create",
        obj=flag,
        taxonomy=review_item.taxonomy,
        after={"review_item": review_item.id, "kind": kind, "comment": comment},
    )
    return flag


@transaction.atomic
def review_flag_resolve(*, flag: ReviewFlag, user) -> ReviewFlag:
    """An admin marks a flag dealt with; it leaves the list of open flags."""
    if not user.is_staff:
        raise FlagError("user", "only an admin can resolve a flag")
    flag = ReviewFlag.objects.select_for_update(of=("self",)).get(id=flag.id)
    if flag.resolved_at is not None:
        raise FlagError("flag", "this flag was already resolved")
    flag.resolved_at, flag.resolved_by = timezone.now(), user
    flag.save(update_fields=["resolved_at", "resolved_by"])
    audit_record(
        actor=user,
        action="review_flag.resolve",
        obj=flag,
        taxonomy=flag.review_item.taxonomy,
        after={"review_item": flag.review_item_id},
    )
    return flag
