"""Batch review: a group's items judged at once, every verdict or none."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotations.models import AuditEvent, FeedbackPair, Group, Judgement, Member, ReviewItem
from annotations.services.review.auto_coding import auto_coding_audit_check
from annotations.services.review.verdict_rules import VerdictError, verdict_effects
from annotations.services.review.verdicts import (
    feedback_pairs,
    item_state,
    judgement_summary,
    live_verdicts,
)


@dataclass(frozen=True)
class BatchResult:
    confirmed: list[Judgement]
    rejected: list[Judgement]


@transaction.atomic
def judgements_create_for_group(
    *, user, group: Group, confirm_item_ids: Sequence[int], reject_item_ids: Sequence[int]
) -> BatchResult:
    """Batch review: confirm ``group`` for some items and mark it a false match for others.

    All or nothing: one item that cannot take its verdict refuses the whole batch. Each verdict
    is decided by the same rules as one at a time (``verdict_rules.verdict_effects``) and its
    effects are written in bulk: about a dozen queries for a whole grid, not a dozen per item.
    """
    overlap = set(confirm_item_ids) & set(reject_item_ids)
    if overlap:
        raise VerdictError("items", f"items {sorted(overlap)} are both confirmed and rejected")
    wanted = [*dict.fromkeys([*confirm_item_ids, *reject_item_ids])]
    items = {
        item.id: item
        for item in ReviewItem.objects.select_for_update(of=("self",))
        .select_related("input__taxonomy", "prediction__top_group")
        .filter(id__in=wanted)
        .order_by("id")
    }
    missing = set(wanted) - items.keys()
    if missing:
        raise VerdictError("items", f"no review items {sorted(missing)}")

    live = live_verdicts(wanted)
    now = timezone.now()
    rejecting = set(reject_item_ids)
    effects = {}
    for item_id in wanted:
        item = items[item_id]
        if item.top_group_id != group.id:
            # Re-predicted since the grid was shown: a conflict with the item's state (409).
            raise VerdictError(
                "prediction", f"item {item_id} is no longer predicted as {group.name}"
            )
        try:
            effects[item_id] = verdict_effects(
                item_state(item, taxonomy=item.input.taxonomy, live=live[item_id]),
                user_id=user.id,
                verdict=Judgement.Verdict.FALSE_MATCH
                if item_id in rejecting
                else Judgement.Verdict.CONFIRM,
                group=group,
                prediction_id=None,
                now=now,
            )
        except VerdictError as exc:
            raise VerdictError(
                exc.field, f"item {item_id}: {exc}", forbidden=exc.forbidden
            ) from None

    batch = uuid.uuid4()
    judgements = [
        Judgement(
            batch=batch,
            review_item=items[item_id],
            verdict=Judgement.Verdict.FALSE_MATCH
            if item_id in rejecting
            else Judgement.Verdict.CONFIRM,
            group=group if effects[item_id].group_id is not None else None,
            rejected_group=group if effects[item_id].rejected_group_id is not None else None,
            user=user,
            prediction_id=items[item_id].prediction_id,
            previous_status=items[item_id].status,
        )
        for item_id in wanted
    ]
    Judgement.objects.bulk_create(judgements)
    FeedbackPair.objects.bulk_create(
        pair
        for judgement in judgements
        for pair in feedback_pairs(
            effects[judgement.review_item_id],
            judgement=judgement,
            taxonomy=group.taxonomy,
            text=judgement.review_item.input.text,
            groups={group.id: group},
        )
    )

    confirmed = [j for j in judgements if j.verdict == Judgement.Verdict.CONFIRM]
    present = set(
        Member.objects.filter(
            group=group,
            normalized_text__in=[j.review_item.input.normalized_text for j in confirmed],
        ).values_list("normalized_text", flat=True)
    )
    new_members = {}
    for judgement in confirmed:
        key = judgement.review_item.input.normalized_text
        if key not in present and key not in new_members:
            new_members[key] = Member(
                taxonomy=group.taxonomy,
                group=group,
                text=judgement.review_item.input.text,
                normalized_text=key,
                source=Member.Source.CURATOR,
                added_by=user,
                judgement=judgement,
            )
    Member.objects.bulk_create(new_members.values())

    for judgement in judgements:
        item, done = judgement.review_item, effects[judgement.review_item_id]
        item.status, item.conflict = done.status, done.conflict
        item.top_group_id, item.top_score = done.top_group_id, done.top_score
        item.leased_by, item.lease_expires_at, item.updated_at = None, None, now
    ReviewItem.objects.bulk_update(
        [j.review_item for j in judgements],
        [
            "status",
            "conflict",
            "leased_by",
            "lease_expires_at",
            "updated_at",
            "top_group",
            "top_score",
        ],
    )
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                actor=user,
                taxonomy=group.taxonomy,
                action="judgement.create",
                object_type="judgement",
                object_id=str(judgement.id),
                after=judgement_summary(judgement),
            )
            for judgement in judgements
        ]
    )
    rejected = [j for j in judgements if j.verdict == Judgement.Verdict.FALSE_MATCH]
    for judgement in judgements:
        judgement.replayed = False
    if any(items[item_id].audit for item_id in confirm_item_ids):
        auto_coding_audit_check(taxonomy=group.taxonomy)
    return BatchResult(confirmed=confirmed, rejected=rejected)
