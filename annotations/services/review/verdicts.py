"""A verdict recorded in one transaction with what follows from it: the curator member,
the feedback pairs, the item's new status and the audit event; a retried request with the same
idempotency key answers the verdict already stored."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.models import (
    FeedbackPair,
    Group,
    Judgement,
    Member,
    Prediction,
    ReviewItem,
)
from annotations.selectors import (
    rejected_groups_for,
)
from annotations.services.audit import audit_record


class VerdictError(ValueError):
    """A verdict that does not fit the item: unknown group, wrong state, missing group.

    ``field`` names what was wrong; ``conflict`` marks errors about the item's state (someone
    else holds it, it changed, it is done) rather than about the request itself;
    ``forbidden`` marks what this user may not do whatever the state (another curator's
    verdict).
    """

    CONFLICT_FIELDS = frozenset({"prediction", "review_item", "idempotency_key", "judgement"})

    def __init__(self, field: str, message: str, *, forbidden: bool = False) -> None:
        self.field = field
        self.forbidden = forbidden
        self.conflict = field in self.CONFLICT_FIELDS and not forbidden
        super().__init__(message)

    @property
    def status_code(self) -> int:
        return 403 if self.forbidden else 409 if self.conflict else 400


@dataclass(frozen=True)
class Evidence:
    group: Group
    member_text: str


def prediction_evidence(prediction: Prediction, group: Group) -> Evidence:
    """The member string the prediction matched for ``group``, else the group's own name."""
    for ranked in prediction.ranked_groups:
        if ranked["group_id"] == group.id and ranked.get("member"):
            return Evidence(group, ranked["member"])
    return Evidence(group, group.name)


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
    if verdict not in Judgement.Verdict.values:
        raise VerdictError("verdict", f"unknown verdict {verdict!r}")
    if item.status == ReviewItem.Status.DONE:
        raise VerdictError("review_item", "this item has already been judged")
    now = timezone.now()
    if item.leased_by_id not in (None, user.id) and item.lease_expires_at > now:
        raise VerdictError("review_item", "another curator is reviewing this item right now")
    if (
        verdict == Judgement.Verdict.SKIP
        and item.status == ReviewItem.Status.SKIPPED
        and item.leased_by_id != user.id
        and Judgement.objects.live()
        .filter(review_item=item)
        .order_by("-created_at", "-id")
        .values_list("user_id", "verdict")
        .first()
        == (user.id, Judgement.Verdict.SKIP)
    ):
        # The same skip sent again (a double click, a retry without a key): one is recorded.
        # Skipping it again on a later pass goes through the card, which leases it first.
        raise VerdictError("review_item", "you skipped this item already")
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
        # Without a group: the best group the card offers, the prediction's best not rejected.
        chosen = group or _best_offered(item, rejected_before)
        if chosen is None:
            raise VerdictError("group", "the prediction has no group to confirm")
        if chosen.id in rejected_before:
            raise VerdictError(
                "group",
                f"{chosen.name} was rejected for this input (a false match): pick another group",
            )
        pairs.append(
            feedback_pair(
                taxonomy, text, prediction_evidence(item.prediction, chosen), True, "confirm"
            )
        )
    elif verdict == Judgement.Verdict.FALSE_MATCH:
        rejected = group or predicted
        if rejected is None:
            raise VerdictError("group", "the prediction has no group to reject")
        if rejected.id in rejected_before:
            raise VerdictError("group", f"{rejected.name} is already marked a false match")
        pairs.append(
            feedback_pair(
                taxonomy, text, prediction_evidence(item.prediction, rejected), False, "false_match"
            )
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
        pairs.append(feedback_pair(taxonomy, text, Evidence(group, group.name), True, "reassign"))
        if rejected is not None:
            pairs.append(
                feedback_pair(
                    taxonomy,
                    text,
                    prediction_evidence(item.prediction, rejected),
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
            feedback_pair(
                taxonomy,
                text,
                prediction_evidence(item.prediction, predicted),
                False,
                "false_match",
            )
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
    item.top_group_id, item.top_score = item_top_now(item)
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


def _best_offered(item: ReviewItem, rejected: set[int]) -> Group | None:
    best = next(
        (g["group_id"] for g in item.prediction.ranked_groups if g["group_id"] not in rejected),
        None,
    )
    return Group.objects.filter(id=best).first() if best is not None else None


def item_top_now(item: ReviewItem) -> tuple[int | None, float | None]:
    """The item's answer as its live verdicts leave it, with the model's score for it (None
    for a group the model did not rank). Once judged (done, the curators agreeing), the
    curators' verdict: the group they put it in, or none after "none of these". Before, the
    prediction's best group no verdict rejected, so a rejected group is never named as the
    answer; an item sampled for double review keeps the prediction's best until it is done, as
    each curator judges it independently of the other. What the input's page, the queue and
    the API show as its top group, from the moment a verdict is stored."""
    ranked = item.prediction.ranked_groups
    if item.status == ReviewItem.Status.DONE and not item.conflict:
        agreed = set(final_outcomes(item).values())
        if len(agreed) == 1:
            (outcome,) = agreed
            if outcome == "none":
                return None, None
            score = next((g["score"] for g in ranked if g["group_id"] == outcome), None)
            return outcome, score
    if item.reviews_required > 1:
        return (ranked[0]["group_id"], ranked[0]["score"]) if ranked else (None, None)
    live = Judgement.objects.live().filter(review_item=item)
    if live.filter(verdict=Judgement.Verdict.NONE).exists():
        return None, None
    rejected = set(
        live.filter(rejected_group__isnull=False).values_list("rejected_group_id", flat=True)
    )
    for group in ranked:
        if group["group_id"] not in rejected:
            return group["group_id"], group["score"]
    return None, None


def _status_after(item: ReviewItem, judgement: Judgement) -> str:
    """Where the item stands after ``judgement``; flags it when curators disagree."""
    if judgement.verdict == Judgement.Verdict.FALSE_MATCH:
        return ReviewItem.Status.AWAITING_GROUP
    if judgement.verdict == Judgement.Verdict.SKIP:
        return ReviewItem.Status.SKIPPED
    outcomes = final_outcomes(item)
    item.conflict = len(set(outcomes.values())) > 1
    if len(outcomes) < item.reviews_required:
        # Wait for a second curator, who sees the card as the first one did.
        return ReviewItem.Status.PENDING
    return ReviewItem.Status.DONE


def final_outcomes(item: ReviewItem) -> dict[int, object]:
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


def judgement_summary(judgement: Judgement) -> dict:
    return {
        "review_item": judgement.review_item_id,
        "input": judgement.review_item.input.text,
        "verdict": judgement.verdict,
        "group": judgement.group_id,
        "rejected_group": judgement.rejected_group_id,
    }


def feedback_pair(
    taxonomy, text: str, evidence: Evidence, label: bool, origin: str
) -> FeedbackPair:
    return FeedbackPair(
        taxonomy=taxonomy,
        text_a=text,
        text_b=evidence.member_text,
        group=evidence.group,
        label=label,
        origin=origin,
    )
