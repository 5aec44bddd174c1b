"""A verdict recorded in one transaction with what follows from it: the curator member,
the feedback pairs, the item's new status and the audit event; a retried request with the same
idempotency key answers the verdict already stored. What follows is decided by
``verdict_rules.verdict_effects``; this module reads the rows it needs, and ``judgements_write``
writes what it says, for the single card and for a batch's items alike."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.models import FeedbackPair, Group, Judgement, Member, ReviewItem, Taxonomy
from annotations.services.audit import audit_records
from annotations.services.review.auto_coding import auto_coding_audit_check
from annotations.services.review.verdict_rules import (
    ItemState,
    LiveVerdict,
    VerdictEffects,
    VerdictError,
    item_answer,
    verdict_effects,
)


class VerdictKeyUsed(VerdictError):
    """The idempotency key already stored a different verdict: ``stored`` is that verdict, or
    None when a request for another item took the key at the same moment. The API names its
    header; the card says in words what was stored, which it can only do with the verdict."""

    def __init__(self, stored: Judgement | None = None) -> None:
        super().__init__("idempotency_key", "this key was already used for a different verdict")
        self.stored = stored


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
        judgement = judgement_record(
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
) -> Judgement:
    """One verdict inside the caller's transaction."""
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
                raise VerdictKeyUsed(earlier)
            earlier.replayed = True
            return earlier

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
    [judgement] = judgements_write(
        [VerdictWrite(item, verdict, effects)],
        groups=named,
        user=user,
        idempotency_key=idempotency_key,
    )
    return judgement


@dataclass(frozen=True)
class VerdictWrite:
    """One decided verdict to write: the item (locked by the caller), the verdict and what
    follows from it."""

    item: ReviewItem
    verdict: str
    effects: VerdictEffects


def judgements_write(
    writes: Sequence[VerdictWrite],
    *,
    groups: Mapping[int, Group],
    user,
    idempotency_key: str = "",
    batch: uuid.UUID | None = None,
) -> list[Judgement]:
    """Write decided verdicts in the caller's transaction: each judgement, its feedback pairs,
    the curator member (kept as it is when the group already holds the text), the item's new
    status and answer with its lease cleared, and the audit event. ``groups`` by id holds every
    group the effects name. Returns the judgements in the order of ``writes``.

    The one writer of verdicts' rows: the single card writes one, a batch all of its items, a
    statement a table rather than one a row per item (a batch of 60 took 480)."""
    if idempotency_key and len(writes) != 1:
        raise ValueError("an idempotency key names one verdict")
    now = timezone.now()
    judgements = [
        Judgement(
            review_item=w.item,
            verdict=w.verdict,
            group=groups.get(w.effects.group_id),
            rejected_group=groups.get(w.effects.rejected_group_id),
            user=user,
            prediction_id=w.item.prediction_id,
            previous_status=w.item.status,
            idempotency_key=idempotency_key,
            batch=batch,
        )
        for w in writes
    ]
    if not idempotency_key:
        # Only a key is unique: without one no insert can collide, so no savepoint is needed.
        Judgement.objects.bulk_create(judgements)
    else:
        try:
            with transaction.atomic():
                judgements[0].save(force_insert=True)
        except IntegrityError:
            # The same key, sent at the same moment for another item: the other request won.
            raise VerdictKeyUsed() from None
    pairs, members = [], {}
    for w, judgement in zip(writes, judgements, strict=True):
        judgement.replayed = False
        taxonomy = w.item.input.taxonomy
        pairs += feedback_pairs(
            w.effects, judgement=judgement, taxonomy=taxonomy, text=w.item.input.text, groups=groups
        )
        if w.effects.group_id is not None:
            members.setdefault(
                (w.effects.group_id, w.item.input.normalized_text),
                Member(
                    taxonomy=taxonomy,
                    group=groups[w.effects.group_id],
                    normalized_text=w.item.input.normalized_text,
                    text=w.item.input.text,
                    source=Member.Source.CURATOR,
                    added_by=user,
                    judgement=judgement,
                ),
            )
        w.item.status, w.item.conflict = w.effects.status, w.effects.conflict
        w.item.leased_by, w.item.lease_expires_at = None, None
        w.item.top_group_id, w.item.top_score = w.effects.top_group_id, w.effects.top_score
        w.item.updated_at = now  # bulk_update does not stamp auto_now fields
    FeedbackPair.objects.bulk_create(pairs)
    # A text the group already holds keeps its member (the unique pair group, text).
    Member.objects.bulk_create(members.values(), ignore_conflicts=True)
    ReviewItem.objects.bulk_update(
        [w.item for w in writes],
        [
            *("status", "leased_by", "lease_expires_at", "conflict", "updated_at"),
            *("top_group", "top_score"),
        ],
    )
    audit_records(
        actor=user,
        action="judgement.create",
        changes=[
            (judgement, w.item.input.taxonomy, None, judgement_summary(judgement))
            for w, judgement in zip(writes, judgements, strict=True)
        ],
    )
    return judgements


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
