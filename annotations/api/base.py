"""What the curation API's views share beyond ``siamweb.web``: the idempotency header, the
queue's pagination, the answers to a refused verdict or edit and to a taxonomy that cannot be
served, and the choice fields of curation's rows."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response

from annotations.models import FeedbackPair, Input, Judgement, Member, ReviewItem
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from siamweb.web.api import CheckedCursor, field_error
from siamweb.web.fields import named_choice_field

IDEMPOTENCY_HEADER = "Idempotency-Key"


IDEMPOTENCY_KEY_MAX_LENGTH = 100  # Judgement.idempotency_key's column


# The characters Django's username validator allows; anything else cannot name a user.
USERNAME_PATTERN = r"^[\w.@+-]+$"


class CursorQueueOrder(CheckedCursor):
    """Keyset pagination in queue order: the index the queue is read from."""

    page_size = 50
    ordering = ("-priority", "id")
    position_is_integer = False  # a priority


def verdict_error_response(exc: VerdictError) -> Response:
    field = IDEMPOTENCY_HEADER if exc.field == "idempotency_key" else exc.field
    return field_error(field, str(exc), exc.status_code)


def edit_error_response(exc: TaxonomyEditError, *, fields: dict[str, str] | None = None):
    """A refused taxonomy edit, naming the request's field (``fields`` maps service names)."""
    code = status.HTTP_409_CONFLICT if exc.conflict else status.HTTP_400_BAD_REQUEST
    return field_error((fields or {}).get(exc.field, exc.field), str(exc), code)


# The queue's "every open item" status: pending, or awaiting the right group.
QUEUE_OPEN = "open"


MemberSourceField = named_choice_field("MemberSource", Member.Source.choices)


InputSourceField = named_choice_field("InputSource", Input.Source.choices)


ReviewItemStatusField = named_choice_field("ReviewItemStatus", ReviewItem.Status.choices)


QueueStatusField = named_choice_field(
    "QueueStatus", [(QUEUE_OPEN, "Pending or awaiting the right group"), *ReviewItem.Status.choices]
)


VerdictField = named_choice_field("Verdict", Judgement.Verdict.choices)


FeedbackOriginField = named_choice_field("FeedbackOrigin", FeedbackPair.Origin.choices)
