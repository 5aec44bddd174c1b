"""Writes for the review loop: inputs in, predictions stored, cards leased, verdicts recorded
and undone, conflicts between curators settled.

A verdict's curator member serves at once from the live engine's delta (``models_app.live``),
so no verdict asks for a rebuild: the scheduled check folds new members into the index in
batches (``SIAMWEB_REINDEX_CHECK_SECONDS``), one load per process instead of one per verdict.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotations.models import (
    AuditEvent,
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
from annotations.selectors import (
    QueueFilters,
    rejected_groups_for,
    review_batch_queue,
    review_queue,
)
from annotations.services.audit import audit_record
from models_app.siamese.text import normalize_text


class VerdictError(ValueError):
    """A verdict that does not fit the item: unknown group, wrong state, missing group.

    ``field`` names what was wrong; ``conflict`` marks errors about the item's state (someone
    else holds it, it changed, it is done) rather than about the request itself.
    """

    CONFLICT_FIELDS = frozenset({"prediction", "review_item", "idempotency_key", "judgement"})

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.conflict = field in self.CONFLICT_FIELDS
        super().__init__(message)


# --- inputs ---------------------------------------------------------------------------------


def _priority(normalization: Normalization, occurrences: int, *, disagreement: bool) -> float:
    """Most worth a look first: a small margin between the top two groups, a low top score,
    a frequent input, and model versions that disagree about it."""
    scores = [group.score for group in normalization.groups] + [0.0, 0.0]
    margin = scores[0] - scores[1]
    return (
        (1.0 - margin)
        + (1.0 - scores[0])
        + 0.1 * math.log1p(occurrences)
        + (0.5 if disagreement else 0.0)
    )


def _reviews_required(normalized_text: str) -> int:
    """Two curators for a fixed, reproducible share of inputs; one for the rest."""
    share = settings.SIAMWEB_DOUBLE_REVIEW_PERCENT
    return 2 if zlib.crc32(normalized_text.encode()) % 100 < share else 1


@transaction.atomic
def inputs_submit(
    *,
    taxonomy: Taxonomy,
    texts: Sequence[str],
    source: str,
    k: int = 5,
    count_occurrence: bool = True,
) -> list[ReviewItem]:
    """Store cleaned texts as inputs with a prediction each, and queue them for review; one
    item per distinct text, in the order given.

    A text already known counts one more occurrence; its open review item keeps its verdicts
    and takes the new prediction, ranked higher when the new model disagrees with the old.
    A handful of queries per call, not per text: uploads and re-predictions send thousands.
    """
    unique: dict[str, str] = {}
    for text in texts:
        unique.setdefault(normalize_text(text), text)
    if not unique:
        return []
    normalizations = dict(
        zip(unique, normalize_texts(taxonomy, list(unique.values()), k=k), strict=True)
    )

    known = {
        row.normalized_text: row
        for row in Input.objects.filter(taxonomy=taxonomy, normalized_text__in=list(unique))
    }
    if count_occurrence:
        Input.objects.filter(id__in=[row.id for row in known.values()]).update(
            occurrences=F("occurrences") + 1
        )
        for row in known.values():
            row.occurrences += 1
    created = Input.objects.bulk_create(
        [
            Input(taxonomy=taxonomy, normalized_text=key, text=text, source=source)
            for key, text in unique.items()
            if key not in known
        ]
    )
    inputs = {**known, **{row.normalized_text: row for row in created}}

    predictions = {}
    for key, normalization in normalizations.items():
        groups = normalization.groups
        predictions[key] = Prediction(
            input=inputs[key],
            model_version_id=normalization.model_version_id,
            ranked_groups=normalization.as_dict()["groups"],
            top_group_id=groups[0].group_id if groups else None,
            top_score=groups[0].score if groups else None,
            margin=(groups[0].score - groups[1].score) if len(groups) > 1 else None,
        )
    Prediction.objects.bulk_create(predictions.values())

    existing = {
        item.input_id: item
        for item in ReviewItem.objects.filter(input__in=list(known.values())).select_related(
            "prediction"
        )
    }
    new_items, updated_items = [], []
    for key, prediction in predictions.items():
        input_row = inputs[key]
        item = existing.get(input_row.id)
        disagreement = (
            item is not None
            and item.prediction.model_version_id != prediction.model_version_id
            and item.prediction.top_group_id != prediction.top_group_id
        )
        priority = _priority(normalizations[key], input_row.occurrences, disagreement=disagreement)
        if item is None:
            new_items.append(
                ReviewItem(
                    input=input_row,
                    taxonomy=taxonomy,
                    prediction=prediction,
                    top_group_id=prediction.top_group_id,
                    top_score=prediction.top_score,
                    priority=priority,
                    reviews_required=_reviews_required(key),
                )
            )
        elif item.status in ReviewItem.OPEN_STATUSES:
            item.prediction = prediction
            item.top_group_id, item.top_score = prediction.top_group_id, prediction.top_score
            item.priority = priority
            item.updated_at = timezone.now()
            updated_items.append(item)
    ReviewItem.objects.bulk_create(new_items)
    ReviewItem.objects.bulk_update(
        updated_items, ["prediction", "top_group", "top_score", "priority", "updated_at"]
    )
    by_input = {item.input_id: item for item in [*new_items, *existing.values()]}
    return [by_input[inputs[key].id] for key in unique]


def review_items_repredict(*, taxonomy: Taxonomy, chunk_size: int = 500) -> int:
    """After a new model goes live: predict every open item again with it. Items whose top
    group changed rank higher (model versions disagree); cards shown before are refused as
    stale, so nobody judges the old prediction. Returns how many items were re-predicted."""
    open_statuses = [*ReviewItem.OPEN_STATUSES, ReviewItem.Status.SKIPPED]
    texts = list(
        ReviewItem.objects.filter(taxonomy=taxonomy, status__in=open_statuses)
        .order_by("id")
        .values_list("input__text", flat=True)
    )
    for start in range(0, len(texts), chunk_size):
        inputs_submit(
            taxonomy=taxonomy,
            texts=texts[start : start + chunk_size],
            source=Input.Source.API,
            count_occurrence=False,
        )
    return len(texts)


# --- leases ---------------------------------------------------------------------------------


def _lease_expiry():
    return timezone.now() + timedelta(seconds=settings.SIAMWEB_REVIEW_LEASE_SECONDS)


def _free_for(user, now) -> Q:
    return Q(leased_by__isnull=True) | Q(lease_expires_at__lte=now) | Q(leased_by=user)


def review_item_claim(*, user, filters: QueueFilters | None = None) -> ReviewItem | None:
    """Lease the next card worth a look to ``user``; None when nothing is left for them.

    The card the curator already holds comes back first, so a reload shows the same card. The
    claim is a conditional update, so two curators asking at once never get the same item.
    """
    filters = filters or QueueFilters()
    held = (
        review_queue(filters=filters, user=user)
        .filter(leased_by=user, lease_expires_at__gt=timezone.now())
        .first()
    )
    if held is not None:
        ReviewItem.objects.filter(id=held.id).update(lease_expires_at=_lease_expiry())
        return _card(held.id)
    for status in filters.statuses_in_order():
        item = _claim_first(
            user=user, queue=review_queue(filters=filters, user=user, status=status)
        )
        if item is not None:
            return item
    return None


def _claim_first(*, user, queue) -> ReviewItem | None:
    for _attempt in range(5):
        candidate = queue.filter(_free_for(user, timezone.now())).values_list("id", flat=True)
        candidate = candidate.first()
        if candidate is None:
            return None
        claimed = (
            ReviewItem.objects.filter(id=candidate)
            .filter(_free_for(user, timezone.now()))
            .update(leased_by=user, lease_expires_at=_lease_expiry())
        )
        if claimed:
            return _card(candidate)
    # Lost five races in a row: others are draining this part of the queue; the caller retries.
    return None


def review_items_claim_for_group(
    *, user, taxonomy: Taxonomy, group: Group, limit: int = 48
) -> list[ReviewItem]:
    """Lease up to ``limit`` pending items predicted for ``group`` to ``user``, for batch review.

    Which items: ``review_batch_queue`` (the one the groups list counts). Items another curator
    holds are left out; the ones this curator already holds stay in.
    """
    now = timezone.now()
    queue = review_batch_queue(user=user, taxonomy=taxonomy, group=group)
    ids = list(queue.values_list("id", flat=True)[:limit])
    ReviewItem.objects.filter(id__in=ids).filter(_free_for(user, now)).update(
        leased_by=user, lease_expires_at=_lease_expiry()
    )
    return list(
        ReviewItem.objects.filter(id__in=ids, leased_by=user)
        .select_related("input", "prediction")
        .order_by("-priority", "id")
    )


def review_item_release(*, item: ReviewItem, user) -> None:
    """Give a held card back to the queue."""
    ReviewItem.objects.filter(id=item.id, leased_by=user).update(
        leased_by=None, lease_expires_at=None
    )


def _card(item_id: int) -> ReviewItem:
    return ReviewItem.objects.select_related(
        "input__taxonomy", "prediction__model_version__taxonomy", "top_group"
    ).get(id=item_id)


# --- verdicts -------------------------------------------------------------------------------


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
        judgement, _ = _judge(
            item_id=review_item.id,
            user=user,
            verdict=verdict,
            group=group,
            prediction_id=prediction_id,
            idempotency_key=idempotency_key,
        )
    return judgement


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

    judgements = [
        Judgement(
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
        pair = _pair(
            group.taxonomy,
            item.input.text,
            _evidence(item.prediction, group),
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
    for judgement in judgements:
        item = judgement.review_item
        if judgement.verdict == Judgement.Verdict.FALSE_MATCH:
            item.status = ReviewItem.Status.AWAITING_GROUP
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
        ["status", "conflict", "leased_by", "lease_expires_at", "updated_at"],
    )
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                actor=user,
                taxonomy=group.taxonomy,
                action="judgement.create",
                object_type="judgement",
                object_id=str(judgement.id),
                after=_judgement_summary(judgement),
            )
            for judgement in judgements
        ]
    )
    rejected = [j for j in judgements if j.verdict == Judgement.Verdict.FALSE_MATCH]
    for judgement in judgements:
        judgement.replayed = False
    return BatchResult(confirmed=confirmed, rejected=rejected)


def _judge(
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
    if verdict not in Judgement.Verdict.values:
        raise VerdictError("verdict", f"unknown verdict {verdict!r}")
    if item.status == ReviewItem.Status.DONE:
        raise VerdictError("review_item", "this item has already been judged")
    now = timezone.now()
    if item.leased_by_id not in (None, user.id) and item.lease_expires_at > now:
        raise VerdictError("review_item", "another curator is reviewing this item right now")
    if prediction_id is not None and prediction_id != item.prediction_id:
        raise VerdictError(
            "prediction", "the prediction changed since this card was shown; judge the new one"
        )
    if group is not None and group.taxonomy_id != taxonomy.id:
        raise VerdictError("group", f"group {group.code} is not in taxonomy {taxonomy.slug}")
    if group is not None and verdict in (Judgement.Verdict.SKIP, Judgement.Verdict.NONE):
        # Dropped silently, a curator who meant reassign would lose the group they picked.
        raise VerdictError(
            "group", f"{verdict} takes no group; to put the input in {group.name}, reassign it"
        )
    live = Judgement.objects.live().filter(review_item=item)
    if live.filter(user=user, verdict__in=Judgement.FINAL_VERDICTS).exists():
        raise VerdictError("review_item", "you have already judged this item")
    rejected_before = rejected_groups_for(item, user=user)
    predicted = item.prediction.top_group
    text = item.input.text
    pairs: list[FeedbackPair] = []
    chosen = rejected = None

    if verdict == Judgement.Verdict.CONFIRM:
        chosen = group or predicted
        if chosen is None:
            raise VerdictError("group", "the prediction has no group to confirm")
        if chosen.id in rejected_before:
            raise VerdictError(
                "group",
                f"{chosen.name} was rejected for this input (a false match): pick another group",
            )
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
            raise VerdictError(
                "group",
                f"{group.name} was rejected for this input (a false match): pick another group",
            )
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
                    taxonomy, text, _evidence(item.prediction, rejected), False, "reassign_negative"
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

    try:
        with transaction.atomic():
            judgement = Judgement.objects.create(
                review_item=item,
                verdict=verdict,
                group=chosen,
                rejected_group=rejected,
                user=user,
                prediction_id=item.prediction_id,
                previous_status=item.status,
                idempotency_key=idempotency_key,
            )
    except IntegrityError:
        # The same key, sent at the same moment for another item: the other request won.
        raise VerdictError(
            "idempotency_key", "this key was already used for a different verdict"
        ) from None
    judgement.replayed = False
    for pair in pairs:
        pair.judgement = judgement
    FeedbackPair.objects.bulk_create(pairs)

    added = False
    if chosen is not None:
        _, added = Member.objects.get_or_create(
            group=chosen,
            normalized_text=item.input.normalized_text,
            defaults={
                "taxonomy": taxonomy,
                "text": text,
                "source": Member.Source.CURATOR,
                "added_by": user,
                "judgement": judgement,
            },
        )

    item.status = _status_after(item, judgement)
    item.leased_by, item.lease_expires_at = None, None
    item.save(update_fields=["status", "leased_by", "lease_expires_at", "conflict", "updated_at"])
    audit_record(
        actor=user,
        action="judgement.create",
        obj=judgement,
        taxonomy=taxonomy,
        after=_judgement_summary(judgement),
    )
    return judgement, added


def _status_after(item: ReviewItem, judgement: Judgement) -> str:
    """Where the item stands after ``judgement``; flags it when curators disagree."""
    if judgement.verdict == Judgement.Verdict.FALSE_MATCH:
        return ReviewItem.Status.AWAITING_GROUP
    if judgement.verdict == Judgement.Verdict.SKIP:
        return ReviewItem.Status.SKIPPED
    outcomes = _final_outcomes(item)
    item.conflict = len(set(outcomes.values())) > 1
    if len(outcomes) < item.reviews_required:
        # Wait for a second curator, who sees the card as the first one did.
        return ReviewItem.Status.PENDING
    return ReviewItem.Status.DONE


def _final_outcomes(item: ReviewItem) -> dict[int, object]:
    """Per curator, where their live final verdict put the input (a group id, or "none")."""
    outcomes: dict[int, object] = {}
    rows = (
        Judgement.objects.live()
        .filter(review_item=item, verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("created_at")
        .values_list("user_id", "verdict", "group_id")
    )
    for user_id, verdict, group_id in rows:
        outcomes[user_id] = "none" if verdict == Judgement.Verdict.NONE else group_id
    return outcomes


def _judgement_summary(judgement: Judgement) -> dict:
    return {
        "review_item": judgement.review_item_id,
        "input": judgement.review_item.input.text,
        "verdict": judgement.verdict,
        "group": judgement.group_id,
        "rejected_group": judgement.rejected_group_id,
    }


def _pair(taxonomy, text: str, evidence: _Evidence, label: bool, origin: str) -> FeedbackPair:
    return FeedbackPair(
        taxonomy=taxonomy,
        text_a=text,
        text_b=evidence.member_text,
        group=evidence.group,
        label=label,
        origin=origin,
    )


# --- undo and conflicts ---------------------------------------------------------------------


@transaction.atomic
def judgement_undo(*, judgement: Judgement, user) -> ReviewItem:
    """Take a verdict back: its feedback pairs and curator member go, the item reopens and
    returns to ``user``'s hands so the card can be judged again.

    Only the latest live verdict on an item can be undone, by its author or an admin.
    """
    judgement = (
        Judgement.objects.select_for_update(of=("self",))
        .select_related("review_item__input", "review_item__taxonomy")
        .get(id=judgement.id)
    )
    item = ReviewItem.objects.select_for_update(of=("self",)).get(id=judgement.review_item_id)
    if judgement.undone_at is not None:
        raise VerdictError("judgement", "this verdict was already undone")
    if judgement.user_id != user.id and not user.is_staff:
        raise VerdictError("judgement", "only its curator or an admin can undo a verdict")
    latest = Judgement.objects.live().filter(review_item=item).order_by("-created_at", "-id")
    if latest.values_list("id", flat=True).first() != judgement.id:
        raise VerdictError("judgement", "a later verdict on this item must be undone first")

    judgement.undone_at = timezone.now()
    judgement.save(update_fields=["undone_at"])
    judgement.feedback_pairs.all().delete()
    removed = list(judgement.members.filter(source=Member.Source.CURATOR))
    Member.objects.filter(id__in=[m.id for m in removed]).delete()

    item.status = judgement.previous_status or ReviewItem.Status.PENDING
    item.conflict = len(set(_final_outcomes(item).values())) > 1
    item.leased_by, item.lease_expires_at = user, _lease_expiry()
    item.save(update_fields=["status", "conflict", "leased_by", "lease_expires_at", "updated_at"])
    audit_record(
        actor=user,
        action="judgement.undo",
        obj=judgement,
        taxonomy=item.taxonomy,
        before=_judgement_summary(judgement),
        after={"review_item": item.id, "status": item.status},
    )
    return item


@transaction.atomic
def judgements_undo(*, judgement_ids: Sequence[int], user) -> list[ReviewItem]:
    """Take back a whole batch (the verdicts one batch-review submit recorded): all of them or,
    when one cannot be undone, none. The items reopen in ``user``'s hands, so the next batch
    shows them again."""
    found = {
        judgement.id: judgement
        for judgement in Judgement.objects.filter(id__in=judgement_ids).order_by("-id")
    }
    missing = sorted(set(judgement_ids) - found.keys())
    if missing:
        raise VerdictError("judgement", f"no verdicts {missing}")
    # Newest first, the order single undos must take when one item holds several verdicts.
    return [judgement_undo(judgement=judgement, user=user) for judgement in found.values()]


@transaction.atomic
def review_conflict_resolve(*, item: ReviewItem, user, group: Group | None) -> ReviewItem:
    """An admin settles curators' disagreement: ``group`` is where the input belongs (None:
    outside the taxonomy). Verdicts that said otherwise are undone; the admin's stands."""
    if not user.is_staff:
        raise VerdictError("user", "only an admin can settle a conflict")
    item = ReviewItem.objects.select_for_update(of=("self",)).get(id=item.id)
    if not item.conflict:
        raise VerdictError("review_item", "this item has no conflict to settle")
    if group is not None and group.taxonomy_id != item.taxonomy_id:
        raise VerdictError("group", f"group {group.code} is not in this taxonomy")
    wanted = "none" if group is None else group.id
    losing = [
        j
        for j in Judgement.objects.live()
        .filter(review_item=item, verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("-created_at", "-id")
        if ("none" if j.verdict == Judgement.Verdict.NONE else j.group_id) != wanted
    ]
    now = timezone.now()
    for judgement in losing:
        judgement.undone_at = now
        judgement.save(update_fields=["undone_at"])
        judgement.feedback_pairs.all().delete()
        judgement.members.filter(source=Member.Source.CURATOR).delete()
    kept = set(_final_outcomes(item).values())
    if wanted not in kept:
        item.status = ReviewItem.Status.PENDING
        item.reviews_required = 1
        item.save(update_fields=["status", "reviews_required"])
        verdict = Judgement.Verdict.NONE if group is None else Judgement.Verdict.REASSIGN
        _judge(
            item_id=item.id,
            user=user,
            verdict=verdict,
            group=group,
            prediction_id=None,
            idempotency_key="",
        )
        item.refresh_from_db()
    item.conflict = False
    item.status = ReviewItem.Status.DONE
    item.save(update_fields=["conflict", "status", "updated_at"])
    audit_record(
        actor=user,
        action="review_item.resolve_conflict",
        obj=item,
        taxonomy=item.taxonomy,
        before={"undone_judgements": [j.id for j in losing]},
        after={"group": group.id if group else None},
    )
    return item
