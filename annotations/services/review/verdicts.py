"""A verdict recorded in one transaction with what follows from it: the curator member,
the feedback pairs, the item's new status and the audit event; a retried request with the same
idempotency key answers the verdict already stored. What follows is decided by
``verdict_rules.verdict_effects``; this module reads the rows it needs, and ``judgement_write``
writes what it says, for the single card and for each item of a batch alike."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.models import FeedbackPair, Group, Judgement, Member, ReviewItem, Taxonomy
from annotations.services.audit import audit_record
from annotations.services.review.auto_coding import auto_coding_audit_check
from annotations.services.review.verdict_rules import (
    ItemState,
    LiveVerdict,
    VerdictEffects,
    VerdictError,
    item_answer,
    verdict_effects,
)


def judgement_create(
    *,
    review_item: ReviewItem,
    user,
    verdict: str,
    group: Group | None = None,
    prediction_id: int | None = None,
    idempotency_key: str = "",
) -> Judgement:
    """Record a verdict and what follows from it, all in one transaction.

    confirm: ``group`` (default: the predicted top group) gains the input as a curator member,
    and a positive pair is stored. false_match: the predicted group (or ``group``) is rejected
    for this input and the item waits for the right group. reassign: ``group`` gains the input,
    with a positive pair and a hard negative against the wrongly predicted group.

    With an ``idempotency_key`` a repeated request returns the verdict already stored for it
    (``judgement.replayed`` is True) instead of recording a second one.
    """
    with transaction.atomic():
        judgement, _ = judgement_record(
            item_id=review_item.id,
            user=user,
            verdict=verdict,
            group=group,
            prediction_id=prediction_id,
            idempotency_key=idempotency_key,
        )
    if review_item.audit and verdict in Judgement.FINAL_VERDICTS and not judgement.replayed:
        auto_coding_audit_check(taxonomy=review_item.taxonomy)
    return judgement


def judgement_record(
    *,
    item_id: int,
    user,
    verdict: str,
    group: Group | None,
    prediction_id: int | None,
    idempotency_key: str,
) -> tuple[Judgement, bool]:
    """One verdict inside the caller's transaction; returns it and whether a member was added."""
    item = (
        ReviewItem.objects.select_for_update(of=("self",))
        .select_related("input__taxonomy", "prediction__top_group")
        .get(id=item_id)
    )
    if idempotency_key:
        earlier = Judgement.objects.filter(user=user, idempotency_key=idempotency_key).first()
        if earlier is not None:
            same = (
                earlier.review_item_id == item.id
                and earlier.verdict == verdict
                and (group is None or group.id in {earlier.group_id, earlier.rejected_group_id})
            )
            if not same:
                raise VerdictError(
                    "idempotency_key", "this key was already used for a different verdict"
                )
            earlier.replayed = True
            return earlier, False

    taxonomy = item.input.taxonomy
    effects = verdict_effects(
        item_state(item, taxonomy=taxonomy),
        user_id=user.id,
        verdict=verdict,
        group=group,
        prediction_id=prediction_id,
        now=timezone.now(),
    )
    named = {g.id: g for g in (group, item.prediction.top_group) if g is not None}
    missing = {effects.group_id, *(pair.group_id for pair in effects.pairs)} - {None, *named}
    # The best group the card offers, when a confirm named none.
    named |= {g.id: g for g in Group.objects.filter(id__in=missing)}
    if effects.group_id is not None and effects.group_id not in named:
        raise VerdictError("group", "the prediction has no group to confirm")
    return judgement_write(
        item=item,
        verdict=verdict,
        effects=effects,
        groups=named,
        user=user,
        idempotency_key=idempotency_key,
    )


def judgement_write(
    *,
    item: ReviewItem,
    verdict: str,
    effects: VerdictEffects,
    groups: Mapping[int, Group],
    user,
    idempotency_key: str = "",
    batch: uuid.UUID | None = None,
) -> tuple[Judgement, bool]:
    """Write a decided verdict in the caller's transaction: the judgement, its feedback pairs,
    the curator member (kept as it is when the group already holds the text), the item's new
    status and answer with its lease cleared, and the audit event. ``groups`` by id holds every
    group ``effects`` names. Returns the judgement and whether a member was added.

    The one writer of a verdict's rows: the single card and each item of a batch come here."""
    taxonomy = item.input.taxonomy
    judgement = Judgement(
        review_item=item,
        verdict=verdict,
        group=groups.get(effects.group_id),
        rejected_group=groups.get(effects.rejected_group_id),
        user=user,
        prediction_id=item.prediction_id,
        previous_status=item.status,
        idempotency_key=idempotency_key,
        batch=batch,
    )
    if not idempotency_key:
        # Only a key is unique: without one no insert can collide, so no savepoint is needed
        # (a batch writes a verdict a tile).
        judgement.save(force_insert=True)
    else:
        try:
            with transaction.atomic():
                judgement.save(force_insert=True)
        except IntegrityError:
            # The same key, sent at the same moment for another item: the other request won.
            raise VerdictError(
                "idempotency_key", "this key was already used for a different verdict"
            ) from None
    judgement.replayed = False
    FeedbackPair.objects.bulk_create(
        feedback_pairs(
            effects, judgement=judgement, taxonomy=taxonomy, text=item.input.text, groups=groups
        )
    )

    added = False
    if effects.group_id is not None:
        _, added = Member.objects.get_or_create(
            group=groups[effects.group_id],
            normalized_text=item.input.normalized_text,
            defaults={
                "taxonomy": taxonomy,
                "text": item.input.text,
                "source": Member.Source.CURATOR,
                "added_by": user,
                "judgement": judgement,
            },
        )

    item.status, item.conflict = effects.status, effects.conflict
    item.leased_by, item.lease_expires_at = None, None
    item.top_group_id, item.top_score = effects.top_group_id, effects.top_score
    item.save(
        update_fields=[
            *("status", "leased_by", "lease_expires_at", "conflict", "updated_at"),
            *("top_group", "top_score"),
        ]
    )
    audit_record(
        actor=user,
        action="judgement.create",
        obj=judgement,
        taxonomy=taxonomy,
        after=judgement_summary(judgement),
    )
    return judgement, added


def live_verdicts(item_ids) -> dict[int, tuple[LiveVerdict, ...]]:
    """Each item's live verdicts, oldest first, as the rules read them."""
    rows = (
        Judgement.objects.live()
        .filter(review_item_id__in=item_ids)
        .order_by("created_at", "id")
        .values_list("review_item_id", "user_id", "verdict", "group_id", "rejected_group_id")
    )
    found: dict[int, list[LiveVerdict]] = {item_id: [] for item_id in item_ids}
    for item_id, *verdict in rows:
        found[item_id].append(LiveVerdict(*verdict))
    return {item_id: tuple(verdicts) for item_id, verdicts in found.items()}


def item_state(
    item: ReviewItem, *, taxonomy: Taxonomy, live: tuple[LiveVerdict, ...] | None = None
) -> ItemState:
    """The item as the rules read it (``live``: its live verdicts, read here when not given)."""
    prediction = item.prediction
    return ItemState(
        taxonomy_id=taxonomy.id,
        taxonomy_slug=taxonomy.slug,
        status=item.status,
        conflict=item.conflict,
        reviews_required=item.reviews_required,
        leased_by_id=item.leased_by_id,
        lease_expires_at=item.lease_expires_at,
        prediction_id=item.prediction_id,
        predicted_group=prediction.top_group,
        ranked_groups=prediction.ranked_groups,
        live=live_verdicts([item.id])[item.id] if live is None else live,
    )


def item_top_now(item: ReviewItem) -> tuple[int | None, float | None]:
    """The item's answer as its live verdicts leave it (``verdict_rules.item_answer``)."""
    return item_answer(
        status=item.status,
        conflict=item.conflict,
        reviews_required=item.reviews_required,
        ranked_groups=item.prediction.ranked_groups,
        live=live_verdicts([item.id])[item.id],
    )


def feedback_pairs(
    effects: VerdictEffects, *, judgement: Judgement, taxonomy: Taxonomy, text: str, groups
) -> list[FeedbackPair]:
    """The feedback pairs a verdict leaves, as rows; ``groups`` by id holds each pair's group."""
    return [
        FeedbackPair(
            judgement=judgement,
            taxonomy=taxonomy,
            text_a=text,
            text_b=pair.member if pair.member is not None else groups[pair.group_id].name,
            group=groups[pair.group_id],
            label=pair.label,
            origin=pair.origin,
        )
        for pair in effects.pairs
    ]


def judgement_summary(judgement: Judgement) -> dict:
    return {
        "review_item": judgement.review_item_id,
        "input": judgement.review_item.input.text,
        "verdict": judgement.verdict,
        "group": judgement.group_id,
        "rejected_group": judgement.rejected_group_id,
    }
