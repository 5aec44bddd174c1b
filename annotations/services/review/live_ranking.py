"""Cards and lists show what the live model and ranker answer now, not what they answered when
the input arrived: a ranker refitted since, or a new model, reorders groups and moves
probabilities, and the curator must judge the answer the API gives for that text at that moment.

Items are ranked again when they are shown (a card, a page of the queue, a batch grid, an input's
page). Where the answer changed, it is stored as a new prediction (the earlier one stays as
history) and the item points at it, so every page and the verdict (which names the prediction it
judged) read the ranking the curator saw. An item with verdicts keeps its ranking: the second
curator of a double review judges blind to the first, and a ranking read after a verdict would
carry it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from annotations.models import Group, Judgement, Prediction, ReviewItem
from models_app.serving.engines import SERVING_UNAVAILABLE
from models_app.serving.normalize import Normalization, rank_taxonomy_groups

logger = logging.getLogger(__name__)

# Groups an item offers, as inputs are first predicted with.
CARD_GROUPS = 5
STALE_NOTE = (
    "The live model cannot rank this card now ({why}): it shows the answer stored when the "
    "input arrived."
)
_SHOWN = (*ReviewItem.OPEN_STATUSES, ReviewItem.Status.SKIPPED)


def review_item_rerank(item: ReviewItem, *, user=None) -> tuple[ReviewItem, str]:
    """``item`` with the live ranking of its text (``review_items_rerank``), and a note for
    the card when the live model cannot answer: the stored ranking stays."""
    return review_items_rerank([item], user=user)[0], _note_of([item])


def review_items_rerank(items: Sequence[ReviewItem], *, user=None) -> list[ReviewItem]:
    """The items (with ``input`` and ``prediction`` loaded), each open one without verdicts
    pointing at the live ranking of its text, stored where it changed; in the order given.
    Where the live model cannot answer, the items keep their stored ranking and carry the
    reason as ``ranking_error``. A card another curator holds keeps the ranking they see
    (``user``: who is looking), so a look at the queue never turns their verdict stale."""
    items = list(items)
    now = timezone.now()
    # A skip judges nothing: a skipped card shows the live answer when it comes back.
    judged = set(
        Judgement.objects.live()
        .filter(review_item_id__in=[item.id for item in items])
        .exclude(verdict=Judgement.Verdict.SKIP)
        .values_list("review_item_id", flat=True)
    )
    due: dict[int, list[ReviewItem]] = {}
    for item in items:
        item.ranking_error = ""
        held_by_another = (
            item.leased_by_id is not None
            and item.lease_expires_at is not None
            and item.lease_expires_at > now
            and (user is None or item.leased_by_id != user.id)
        )
        if item.status in _SHOWN and item.id not in judged and not held_by_another:
            due.setdefault(item.taxonomy_id, []).append(item)
    for group in due.values():
        taxonomy = group[0].input.taxonomy
        try:
            answers = rank_taxonomy_groups(
                taxonomy, [item.input.text for item in group], k=CARD_GROUPS
            )
        except SERVING_UNAVAILABLE as exc:
            logger.warning("%s item(s) of %s show their stored ranking: %s", len(group),
                           taxonomy.slug, exc)  # fmt: skip
            for item in group:
                item.ranking_error = str(exc)
            continue
        _store_changed(group, answers)
    return items


def _note_of(items: Sequence[ReviewItem]) -> str:
    errors = [item.ranking_error for item in items if getattr(item, "ranking_error", "")]
    return STALE_NOTE.format(why=errors[0]) if errors else ""


def _store_changed(items: list[ReviewItem], answers: list[Normalization]) -> None:
    changed = []
    for item, answer in zip(items, answers, strict=True):
        groups = answer.as_dict()["groups"]
        stored = item.prediction
        if groups != stored.ranked_groups or answer.model_version_id != stored.model_version_id:
            changed.append((item, answer, groups))
    if not changed:
        return
    moved: list[ReviewItem] = []
    with transaction.atomic():
        predictions = Prediction.objects.bulk_create(
            [_prediction(item, answer, groups) for item, answer, groups in changed]
        )
        now = timezone.now()
        for (item, _, _), prediction in zip(changed, predictions, strict=True):
            # Only while the item still shows the ranking this replaces: a verdict or another
            # curator's refresh in between keeps theirs.
            updated = ReviewItem.objects.filter(
                id=item.id, prediction_id=item.prediction_id
            ).update(
                prediction=prediction,
                top_group_id=prediction.top_group_id,
                top_score=prediction.top_score,
                updated_at=now,
            )
            if updated:
                item.prediction = prediction
                item.top_group_id, item.top_score = prediction.top_group_id, prediction.top_score
                moved.append(item)
    # The top groups the pages name, read in one query rather than one a row.
    groups = Group.objects.in_bulk({item.top_group_id for item in moved} - {None})
    for item in moved:
        item.top_group = groups.get(item.top_group_id)


def _prediction(item: ReviewItem, answer: Normalization, groups: list[dict]) -> Prediction:
    top = answer.groups[0] if answer.groups else None
    runner_up = answer.groups[1] if len(answer.groups) > 1 else None
    return Prediction(
        input_id=item.input_id,
        model_version_id=answer.model_version_id,
        ranked_groups=groups,
        top_group_id=top.group_id if top else None,
        top_score=top.score if top else None,
        margin=top.score - runner_up.score if runner_up else None,
    )
