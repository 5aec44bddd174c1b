"""Batch review: a group's items judged at once, every verdict or none."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotations.models import Group, Judgement, ReviewItem
from annotations.services.review.auto_coding import auto_coding_audit_check
from annotations.services.review.verdict_rules import VerdictError, verdict_effects
from annotations.services.review.verdicts import (
    VerdictWrite,
    item_state,
    judgements_write,
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

    All or nothing: one item that cannot take its verdict refuses the whole batch before
    anything is written. Each verdict is decided by the same rules as one at a time
    (``verdict_rules.verdict_effects``) and written by the same writer
    (``verdicts.judgements_write``), all of them at once in this one transaction.
    """
    overlap = set(confirm_item_ids) & set(reject_item_ids)
    if overlap:
        raise VerdictError("items", f"items {sorted(overlap)} are both confirmed and rejected")
    verdicts = {
        **dict.fromkeys(confirm_item_ids, Judgement.Verdict.CONFIRM),
        **dict.fromkeys(reject_item_ids, Judgement.Verdict.FALSE_MATCH),
    }
    wanted = [*verdicts]
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
                verdict=verdicts[item_id],
                group=group,
                prediction_id=None,
                now=now,
            )
        except VerdictError as exc:
            raise VerdictError(
                exc.field, f"item {item_id}: {exc}", forbidden=exc.forbidden
            ) from None

    judgements = judgements_write(
        [VerdictWrite(items[i], verdicts[i], effects[i]) for i in wanted],
        groups={group.id: group},
        user=user,
        batch=uuid.uuid4(),
    )
    if any(items[item_id].audit for item_id in confirm_item_ids):
        auto_coding_audit_check(taxonomy=group.taxonomy)
    return BatchResult(
        confirmed=[j for j in judgements if j.verdict == Judgement.Verdict.CONFIRM],
        rejected=[j for j in judgements if j.verdict == Judgement.Verdict.FALSE_MATCH],
    )
