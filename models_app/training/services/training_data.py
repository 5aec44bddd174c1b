"""What a model learns from: the taxonomy's member strings and the curators' feedback pairs,
as plain rows for the engine; and the progress callback every long job reports through."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable

from django.db.models import Max

from annotations.models import FeedbackPair, Taxonomy
from models_app.siamese.sampling import FeedbackExample
from models_app.siamese.text import comparison_key

logger = logging.getLogger(__name__)


def feedback_examples(
    taxonomy: Taxonomy,
    *,
    until: int,
    after: int = 0,
    keep: Callable[[str], bool] = lambda text: not feedback_is_held_out(text),
) -> list[FeedbackExample]:
    """Curator pairs after pair ``after`` up to pair ``until`` whose text ``keep`` accepts
    (by default: less the held-out fifth kept for testing)."""
    return [
        FeedbackExample(text=text, group_id=group_id, label=label, member_text=member)
        for text, member, group_id, label in FeedbackPair.objects.filter(
            taxonomy=taxonomy, group__isnull=False, id__gt=after, id__lte=until
        )
        .order_by("id")
        .values_list("text_a", "text_b", "group_id", "label")
        if keep(text)
    ]


def held_out_texts(
    taxonomy: Taxonomy, *, after: int = 0, until: int | None = None
) -> frozenset[str]:
    """Normalized judged texts in the held-out fifth, of feedback pairs after pair ``after``
    (up to pair ``until``)."""
    # Pairs with a group: a "none of these" verdict gives nothing to train on or to test.
    pairs = FeedbackPair.objects.filter(taxonomy=taxonomy, id__gt=after, group__isnull=False)
    if until is not None:
        pairs = pairs.filter(id__lte=until)
    texts = pairs.values_list("text_a", flat=True)
    return frozenset(comparison_key(text) for text in texts if feedback_is_held_out(text))


def feedback_last_id(taxonomy: Taxonomy) -> int:
    """The newest feedback pair's id: a run trains up to here, later verdicts wait for the next."""
    return FeedbackPair.objects.filter(taxonomy=taxonomy).aggregate(n=Max("id"))["n"] or 0


def feedback_is_held_out(text: str) -> bool:
    """A fixed fifth of curator-judged texts, kept to test on: a build never trains on them (its
    ``verdicts`` test set); a fine-tune measures the new ones before its catch-up phase learns them
    (``models_app.training.retraining.finetune_execute``)."""
    return zlib.crc32(comparison_key(text).encode()) % 5 == 0
