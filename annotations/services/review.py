"""Writes for the review loop: inputs in, predictions stored, verdicts recorded."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from annotations.models import (
    FeedbackPair,
    Group,
    Input,
    Judgement,
    Member,
    Prediction,
    ReviewItem,
    Taxonomy,
)
from annotations.normalization import Normalization, normalize_texts
from models_app.models import TrainingRun
from models_app.services import training_run_request
from models_app.siamese.text import normalize_text


class VerdictError(ValueError):
    """A verdict that does not fit the item: unknown group, wrong state, missing group."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def _priority(normalization: Normalization, occurrences: int) -> float:
    """Most worth a look first: a small margin between the top two groups, a low top score."""
    scores = [group.score for group in normalization.groups] + [0.0, 0.0]
    margin = scores[0] - scores[1]
    return (1.0 - margin) + (1.0 - scores[0]) + 0.1 * math.log1p(occurrences)


@transaction.atomic
def inputs_submit(
    *, taxonomy: Taxonomy, texts: Sequence[str], source: str, k: int = 5
) -> list[ReviewItem]:
    """Store cleaned texts as inputs with a prediction each, and queue them for review.

    A text already known counts one more occurrence; its open review item keeps its verdicts.
    """
    unique: dict[str, str] = {}
    for text in texts:
        unique.setdefault(normalize_text(text), text)
    normalizations = normalize_texts(taxonomy, list(unique.values()), k=k)
    items = []
    for (key, text), normalization in zip(unique.items(), normalizations, strict=True):
        input_row, created = Input.objects.get_or_create(
            taxonomy=taxonomy, normalized_text=key, defaults={"text": text, "source": source}
        )
        if not created:
            Input.objects.filter(id=input_row.id).update(occurrences=F("occurrences") + 1)
            input_row.refresh_from_db(fields=["occurrences"])
        groups = normalization.groups
        prediction = Prediction.objects.create(
            input=input_row,
            model_version_id=normalization.model_version_id,
            ranked_groups=normalization.as_dict()["groups"],
            top_group_id=groups[0].group_id if groups else None,
            top_score=groups[0].score if groups else None,
            margin=(groups[0].score - groups[1].score) if len(groups) > 1 else None,
        )
        priority = _priority(normalization, input_row.occurrences)
        item, item_created = ReviewItem.objects.get_or_create(
            input=input_row, defaults={"prediction": prediction, "priority": priority}
        )
        if not item_created and item.status in ReviewItem.OPEN_STATUSES:
            item.prediction, item.priority = prediction, priority
            item.save(update_fields=["prediction", "priority", "updated_at"])
        items.append(item)
    return items


@dataclass(frozen=True)
class _Evidence:
    group: Group
    member_text: str


def _evidence(prediction: Prediction, group: Group) -> _Evidence:
    """The member string the prediction matched for ``group``, else the group's own name."""
    for ranked in prediction.ranked_groups:
        if ranked["group_id"] == group.id and ranked.get("member"):
            return _Evidence(group, ranked["member"])
    return _Evidence(group, group.name)


@transaction.atomic
def judgement_create(
    *,
    review_item: ReviewItem,
    user,
    verdict: str,
    group: Group | None = None,
    prediction_id: int | None = None,
) -> Judgement:
    """Record a verdict and what follows from it, all in one transaction.

    confirm: ``group`` (default: the predicted top group) gains the input as a curator member,
    and a positive pair is stored. false_match: the predicted group (or ``group``) is rejected
    for this input and the item waits for the right group. reassign: ``group`` gains the input,
    with a positive pair and a hard negative against the wrongly predicted group.
    """
    item = (
        ReviewItem.objects.select_for_update(of=("self",))
        .select_related("input__taxonomy", "prediction__top_group")
        .get(id=review_item.id)
    )
    taxonomy = item.input.taxonomy
    if verdict not in Judgement.Verdict.values:
        raise VerdictError("verdict", f"unknown verdict {verdict!r}")
    if item.status == ReviewItem.Status.DONE:
        raise VerdictError("review_item", "this item has already been judged")
    if prediction_id is not None and prediction_id != item.prediction_id:
        raise VerdictError(
            "prediction", "the prediction changed since this card was shown; judge the new one"
        )
    if group is not None and group.taxonomy_id != taxonomy.id:
        raise VerdictError("group", f"group {group.code} is not in taxonomy {taxonomy.slug}")
    rejected_before = set(
        Judgement.objects.filter(review_item=item, rejected_group__isnull=False).values_list(
            "rejected_group_id", flat=True
        )
    )
    predicted = item.prediction.top_group
    text = item.input.text
    pairs: list[FeedbackPair] = []
    chosen = rejected = None

    if verdict == Judgement.Verdict.CONFIRM:
        chosen = group or predicted
        if chosen is None:
            raise VerdictError("group", "the prediction has no group to confirm")
        if chosen.id in rejected_before:
            raise VerdictError("group", f"{chosen.name} was rejected for this input")
        pairs.append(_pair(taxonomy, text, _evidence(item.prediction, chosen), True, "confirm"))
    elif verdict == Judgement.Verdict.FALSE_MATCH:
        rejected = group or predicted
        if rejected is None:
            raise VerdictError("group", "the prediction has no group to reject")
        if rejected.id in rejected_before:
            raise VerdictError("group", f"{rejected.name} is already marked a false match")
        pairs.append(
            _pair(taxonomy, text, _evidence(item.prediction, rejected), False, "false_match")
        )
    elif verdict == Judgement.Verdict.REASSIGN:
        if group is None:
            raise VerdictError("group", "reassign needs the group the input belongs to")
        if group.id in rejected_before:
            raise VerdictError("group", f"{group.name} was rejected for this input")
        chosen = group
        # After a false match the wrong group is already recorded; don't count it twice.
        rejected = (
            predicted
            if predicted is not None
            and predicted.id != group.id
            and predicted.id not in rejected_before
            else None
        )
        pairs.append(_pair(taxonomy, text, _Evidence(group, group.name), True, "reassign"))
        if rejected is not None:
            pairs.append(
                _pair(
                    taxonomy,
                    text,
                    _evidence(item.prediction, rejected),
                    False,
                    "reassign_negative",
                )
            )
    elif (
        verdict == Judgement.Verdict.NONE
        and predicted is not None
        and predicted.id not in rejected_before
    ):
        rejected = predicted
        pairs.append(
            _pair(taxonomy, text, _evidence(item.prediction, predicted), False, "false_match")
        )

    judgement = Judgement.objects.create(
        review_item=item, verdict=verdict, group=chosen, rejected_group=rejected, user=user
    )
    for pair in pairs:
        pair.judgement = judgement
    FeedbackPair.objects.bulk_create(pairs)

    if chosen is not None:
        Member.objects.get_or_create(
            group=chosen,
            normalized_text=item.input.normalized_text,
            defaults={
                "taxonomy": taxonomy,
                "text": text,
                "source": Member.Source.CURATOR,
                "added_by": user,
            },
        )
        training_run_request(
            taxonomy=taxonomy, kind=TrainingRun.Kind.REINDEX, trigger=TrainingRun.Trigger.VERDICTS
        )

    item.status = {
        Judgement.Verdict.FALSE_MATCH: ReviewItem.Status.AWAITING_GROUP,
        Judgement.Verdict.SKIP: ReviewItem.Status.SKIPPED,
    }.get(verdict, ReviewItem.Status.DONE)
    item.save(update_fields=["status", "updated_at"])
    return judgement


def _pair(taxonomy, text: str, evidence: _Evidence, label: bool, origin: str) -> FeedbackPair:
    return FeedbackPair(
        taxonomy=taxonomy,
        text_a=text,
        text_b=evidence.member_text,
        group=evidence.group,
        label=label,
        origin=origin,
    )
