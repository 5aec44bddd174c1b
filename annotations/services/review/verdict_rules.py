"""What a verdict does, decided once. Given an item as its live verdicts leave it and one
curator's verdict, ``verdict_effects`` refuses it (``VerdictError``) or says what follows: the
group the text joins, the group it is rejected from, the feedback pairs, and the item's status,
conflict and answer. Plain data in and out, no query: the single card
(``verdicts.judgement_record``) and the batch (``batch.judgements_create_for_group``) read the
rows, call it and write what it returns with one writer (``verdicts.judgements_write``), so the
two cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from annotations.models import Group, Judgement, ReviewItem

# Where a curator's final verdict put the input: a group id, or this for "none of these".
NO_GROUP = "none"


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
class LiveVerdict:
    """One verdict not taken back, as the rules read it."""

    user_id: int
    verdict: str
    group_id: int | None
    rejected_group_id: int | None


@dataclass(frozen=True)
class ItemState:
    """A review item as the rules read it: its row, its prediction and its live verdicts."""

    taxonomy_id: int
    taxonomy_slug: str
    status: str
    conflict: bool
    reviews_required: int
    leased_by_id: int | None
    lease_expires_at: datetime | None
    prediction_id: int | None
    predicted_group: Group | None  # the prediction's top group
    ranked_groups: Sequence[Mapping]  # the prediction's groups, best first
    live: tuple[LiveVerdict, ...]  # oldest first


@dataclass(frozen=True)
class PairEffect:
    """A feedback pair to store: ``member`` is the member string the prediction matched for
    the group, None where the pair holds the group's own name."""

    group_id: int
    member: str | None
    label: bool
    origin: str


@dataclass(frozen=True)
class VerdictEffects:
    group_id: int | None  # the group the text joins as a curator member
    rejected_group_id: int | None
    pairs: tuple[PairEffect, ...]
    status: str
    conflict: bool
    top_group_id: int | None
    top_score: float | None


def rejected_group_ids(
    live: Sequence[LiveVerdict], *, reviews_required: int, user_id: int | None = None
) -> set[int]:
    """Groups already rejected for the item's input. On an item sampled for double review,
    only ``user_id``'s own rejections count, so the second curator judges independently."""
    mine_only = reviews_required > 1 and user_id is not None
    return {
        row.rejected_group_id
        for row in live
        if row.rejected_group_id is not None and (not mine_only or row.user_id == user_id)
    }


def final_outcomes(live: Sequence[LiveVerdict]) -> dict[int, object]:
    """Per curator, where their latest final verdict put the input (a group id, or NO_GROUP)."""
    return {
        row.user_id: NO_GROUP if row.verdict == Judgement.Verdict.NONE else row.group_id
        for row in live
        if row.verdict in Judgement.FINAL_VERDICTS
    }


def item_answer(
    *,
    status: str,
    conflict: bool,
    reviews_required: int,
    ranked_groups: Sequence[Mapping],
    live: Sequence[LiveVerdict],
) -> tuple[int | None, float | None]:
    """The item's answer as its live verdicts leave it, with the model's score for it (None
    for a group the model did not rank). Once judged (done, the curators agreeing), the
    curators' verdict: the group they put it in, or none after "none of these". Before, the
    prediction's best group no verdict rejected, so a rejected group is never named as the
    answer; an item sampled for double review keeps the prediction's best until it is done, as
    each curator judges it independently of the other. What the input's page, the queue and
    the API show as its top group, from the moment a verdict is stored."""
    ranked = ranked_groups
    if status == ReviewItem.Status.DONE and not conflict:
        agreed = set(final_outcomes(live).values())
        if len(agreed) == 1:
            (outcome,) = agreed
            if outcome == NO_GROUP:
                return None, None
            score = next((g["score"] for g in ranked if g["group_id"] == outcome), None)
            return outcome, score
    if reviews_required > 1:
        return (ranked[0]["group_id"], ranked[0]["score"]) if ranked else (None, None)
    if any(row.verdict == Judgement.Verdict.NONE for row in live):
        return None, None
    rejected = rejected_group_ids(live, reviews_required=reviews_required)
    for group in ranked:
        if group["group_id"] not in rejected:
            return group["group_id"], group["score"]
    return None, None


def matched_member(state: ItemState, group_id: int) -> str | None:
    """The member string the prediction matched for the group, if it ranked it with one."""
    for ranked in state.ranked_groups:
        if ranked["group_id"] == group_id and ranked.get("member"):
            return ranked["member"]
    return None


def verdict_effects(
    state: ItemState,
    *,
    user_id: int,
    verdict: str,
    group: Group | None,
    prediction_id: int | None,
    now: datetime,
) -> VerdictEffects:
    """What ``user_id``'s verdict on the item does, or the VerdictError that refuses it.

    confirm: ``group`` (default: the best group the card offers) gains the input, with a
    positive pair. false_match: the predicted group (or ``group``) is rejected for the input and
    the item waits for the right group. reassign: ``group`` gains the input, with a positive
    pair and a hard negative against the wrongly predicted group. none: the predicted group, if
    not rejected yet, gets a negative pair. skip: nothing but the item's status.
    """
    if verdict not in Judgement.Verdict.values:
        raise VerdictError("verdict", f"unknown verdict {verdict!r}")
    if state.status == ReviewItem.Status.DONE:
        raise VerdictError("review_item", "this item has already been judged")
    if state.leased_by_id not in (None, user_id) and state.lease_expires_at > now:
        raise VerdictError("review_item", "another curator is reviewing this item right now")
    if (
        verdict == Judgement.Verdict.SKIP
        and state.status == ReviewItem.Status.SKIPPED
        and state.leased_by_id != user_id
        and state.live
        and (state.live[-1].user_id, state.live[-1].verdict) == (user_id, Judgement.Verdict.SKIP)
    ):
        # The same skip sent again (a double click, a retry without a key): one is recorded.
        # Skipping it again on a later pass goes through the card, which leases it first.
        raise VerdictError("review_item", "you skipped this item already")
    if prediction_id is not None and prediction_id != state.prediction_id:
        raise VerdictError(
            "prediction", "the prediction changed since this card was shown; judge the new one"
        )
    if group is not None and group.taxonomy_id != state.taxonomy_id:
        raise VerdictError("group", f"group {group.code} is not in taxonomy {state.taxonomy_slug}")
    if group is not None and verdict in (Judgement.Verdict.SKIP, Judgement.Verdict.NONE):
        # Dropped silently, a curator who meant reassign would lose the group they picked.
        raise VerdictError(
            "group", f"{verdict} takes no group; to put the input in {group.name}, reassign it"
        )
    if any(
        row.user_id == user_id and row.verdict in Judgement.FINAL_VERDICTS for row in state.live
    ):
        raise VerdictError("review_item", "you have already judged this item")
    rejected_before = rejected_group_ids(
        state.live, reviews_required=state.reviews_required, user_id=user_id
    )
    predicted = state.predicted_group.id if state.predicted_group is not None else None
    pairs: list[PairEffect] = []
    chosen = rejected = None

    def evidence(group_id: int, label: bool, origin: str) -> PairEffect:
        return PairEffect(group_id, matched_member(state, group_id), label, origin)

    if verdict == Judgement.Verdict.CONFIRM:
        # Without a group: the best group the card offers, the prediction's best not rejected.
        if group is not None:
            if group.id in rejected_before:
                raise VerdictError(
                    "group",
                    f"{group.name} was rejected for this input (a false match): pick another group",
                )
            chosen = group.id
        else:
            offered = (g["group_id"] for g in state.ranked_groups)
            chosen = next((g for g in offered if g not in rejected_before), None)
            if chosen is None:
                raise VerdictError("group", "the prediction has no group to confirm")
        pairs.append(evidence(chosen, True, "confirm"))
    elif verdict == Judgement.Verdict.FALSE_MATCH:
        named = group or state.predicted_group
        if named is None:
            raise VerdictError("group", "the prediction has no group to reject")
        rejected = named.id
        if rejected in rejected_before:
            raise VerdictError("group", f"{named.name} is already marked a false match")
        pairs.append(evidence(rejected, False, "false_match"))
    elif verdict == Judgement.Verdict.REASSIGN:
        if group is None:
            raise VerdictError("group", "reassign needs the group the input belongs to")
        if group.id in rejected_before:
            raise VerdictError(
                "group",
                f"{group.name} was rejected for this input (a false match): pick another group",
            )
        chosen = group.id
        # After a false match the wrong group is already recorded; don't count it twice.
        if predicted is not None and predicted != group.id and predicted not in rejected_before:
            rejected = predicted
        pairs.append(PairEffect(group.id, None, True, "reassign"))
        if rejected is not None:
            pairs.append(evidence(rejected, False, "reassign_negative"))
    elif (
        verdict == Judgement.Verdict.NONE
        and predicted is not None
        and predicted not in rejected_before
    ):
        rejected = predicted
        pairs.append(evidence(predicted, False, "false_match"))

    after = (
        *state.live,
        LiveVerdict(user_id=user_id, verdict=verdict, group_id=chosen, rejected_group_id=rejected),
    )
    conflict = state.conflict
    if verdict == Judgement.Verdict.FALSE_MATCH:
        status = ReviewItem.Status.AWAITING_GROUP
    elif verdict == Judgement.Verdict.SKIP:
        status = ReviewItem.Status.SKIPPED
    else:
        outcomes = final_outcomes(after)
        conflict = len(set(outcomes.values())) > 1
        # Short of the reviews required, wait for a second curator, who sees the card as the
        # first one did.
        done = len(outcomes) >= state.reviews_required
        status = ReviewItem.Status.DONE if done else ReviewItem.Status.PENDING
    top_group_id, top_score = item_answer(
        status=status,
        conflict=conflict,
        reviews_required=state.reviews_required,
        ranked_groups=state.ranked_groups,
        live=after,
    )
    return VerdictEffects(
        group_id=chosen,
        rejected_group_id=rejected,
        pairs=tuple(pairs),
        status=status,
        conflict=conflict,
        top_group_id=top_group_id,
        top_score=top_score,
    )
