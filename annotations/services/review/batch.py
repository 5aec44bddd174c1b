"""Batch review: a group's items judged at once, every verdict or none."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotations.models import (
    AuditEvent,
    FeedbackPair,
    Group,
    Judgement,
    Member,
    ReviewItem,
)
from annotations.services.review.verdicts import (
    VerdictError,
    feedback_pair,
    judgement_summary,
    prediction_evidence,
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

    All or nothing: one item that cannot take its verdict refuses the whole batch. The same
    rules and effects as one verdict at a time, written in bulk: about a dozen queries for a
    whole grid, not a dozen per item.
    """
    overlap = set(confirm_item_ids) & set(reject_item_ids)
    if overlap:
        raise VerdictError("items", f"items {sorted(overlap)} are both confirmed and rejected")
    wanted = [*dict.fromkeys([*confirm_item_ids, *reject_item_ids])]
    items = {
        item.id: item
        for item in ReviewItem.objects.select_for_update(of=("self",))
        .select_related("input", "prediction")
        .filter(id__in=wanted)
        .order_by("id")
    }
    missing = set(wanted) - items.keys()
    if missing:
        raise VerdictError("items", f"no review items {sorted(missing)}")

    live = list(
        Judgement.objects.live()
        .filter(review_item_id__in=wanted)
        .values_list("review_item_id", "user_id", "verdict", "group_id", "rejected_group_id")
    )
    now = timezone.now()
    rejecting = set(reject_item_ids)
    for item_id in wanted:
        item = items[item_id]
        if item.top_group_id != group.id:
            # Re-predicted since the grid was shown: a conflict with the item's state (409).
            raise VerdictError(
                "prediction", f"item {item_id} is no longer predicted as {group.name}"
            )
        if item.status == ReviewItem.Status.DONE:
            raise VerdictError("review_item", f"item {item_id} has already been judged")
        if item.leased_by_id not in (None, user.id) and item.lease_expires_at > now:
            raise VerdictError(
                "review_item", f"another curator is reviewing this item ({item_id}) right now"
            )
        mine_only = item.reviews_required > 1
        for row_item, row_user, verdict, _, rejected_id in live:
            if row_item != item_id:
                continue
            if row_user == user.id and verdict in Judgement.FINAL_VERDICTS:
                raise VerdictError("review_item", f"you have already judged item {item_id}")
            if rejected_id == group.id and (row_user == user.id or not mine_only):
                done = "is already marked" if item_id in rejecting else "was rejected"
                raise VerdictError("group", f"{group.name} {done} for item {item_id}")

    batch = uuid.uuid4()
    judgements = [
        Judgement(
            batch=batch,
            review_item=items[item_id],
            verdict=Judgement.Verdict.FALSE_MATCH
            if item_id in rejecting
            else Judgement.Verdict.CONFIRM,
            group=None if item_id in rejecting else group,
            rejected_group=group if item_id in rejecting else None,
            user=user,
            prediction_id=items[item_id].prediction_id,
            previous_status=items[item_id].status,
        )
        for item_id in wanted
    ]
    Judgement.objects.bulk_create(judgements)
    pairs = []
    for judgement in judgements:
        item = judgement.review_item
        confirm = judgement.verdict == Judgement.Verdict.CONFIRM
        pair = feedback_pair(
            group.taxonomy,
            item.input.text,
            prediction_evidence(item.prediction, group),
            confirm,
            "confirm" if confirm else "false_match",
        )
        pair.judgement = judgement
        pairs.append(pair)
    FeedbackPair.objects.bulk_create(pairs)

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

    outcomes: dict[int, dict[int, object]] = {}
    for row_item, row_user, verdict, group_id, _ in live:
        if verdict in Judgement.FINAL_VERDICTS:
            outcomes.setdefault(row_item, {})[row_user] = (
                "none" if verdict == Judgement.Verdict.NONE else group_id
            )
    rejected_before: dict[int, set[int]] = {}
    for row_item, _, _, _, rejected_id in live:
        if rejected_id is not None:
            rejected_before.setdefault(row_item, set()).add(rejected_id)
    for judgement in judgements:
        item = judgement.review_item
        if judgement.verdict == Judgement.Verdict.FALSE_MATCH:
            item.status = ReviewItem.Status.AWAITING_GROUP
            if item.reviews_required == 1:
                # As one verdict at a time (``item_top_now``): the rejected group is never
                # named as the item's answer; the next group the card offers is.
                ruled_out = rejected_before.get(item.id, set()) | {group.id}
                item.top_group_id, item.top_score = next(
                    (
                        (g["group_id"], g["score"])
                        for g in item.prediction.ranked_groups
                        if g["group_id"] not in ruled_out
                    ),
                    (None, None),
                )
        else:
            per_user = {**outcomes.get(item.id, {}), user.id: group.id}
            item.conflict = len(set(per_user.values())) > 1
            item.status = (
                ReviewItem.Status.PENDING
                if len(per_user) < item.reviews_required
                else ReviewItem.Status.DONE
            )
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
    return BatchResult(confirmed=confirmed, rejected=rejected)
