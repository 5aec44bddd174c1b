"""A verdict's effects are decided once, by a pure function (``verdict_rules.verdict_effects``):
read here without a database, and the single card and the batch agree on what it decides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from annotations.models import FeedbackPair, Group, Judgement, Member, ReviewItem
from annotations.services.review.batch import judgements_create_for_group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdict_rules import (
    ItemState,
    LiveVerdict,
    PairEffect,
    VerdictError,
    verdict_effects,
)
from annotations.services.review.verdicts import judgement_create

NOW = datetime(2025, 1, 1, tzinfo=UTC)
NURSE = Group(id=1, taxonomy_id=7, code="29-1141", name="Registered Nurses")
MIDWIFE = Group(id=2, taxonomy_id=7, code="29-9099", name="Nurse Midwives")
COOK = Group(id=3, taxonomy_id=7, code="35-2014", name="Cooks")
RANKED = [
    {"group_id": 1, "score": 0.9, "member": "Staff Nurse"},
    {"group_id": 2, "score": 0.7, "member": None},
    {"group_id": 3, "score": 0.2, "member": "Line Cook"},
]
ANN, BOB = 10, 11


def state(*live: LiveVerdict, reviews_required: int = 1, **changes) -> ItemState:
    fields = {
        "taxonomy_id": 7,
        "taxonomy_slug": "jobs",
        "status": ReviewItem.Status.PENDING,
        "conflict": False,
        "reviews_required": reviews_required,
        "leased_by_id": None,
        "lease_expires_at": None,
        "prediction_id": 5,
        "predicted_group": NURSE,
        "ranked_groups": RANKED,
        "live": live,
    }
    return ItemState(**{**fields, **changes})


def effects(item: ItemState, verdict: str, group: Group | None = None, *, user_id: int = ANN):
    return verdict_effects(
        item, user_id=user_id, verdict=verdict, group=group, prediction_id=None, now=NOW
    )


def test_a_confirm_without_a_group_takes_the_best_group_no_verdict_rejected():
    rejected = LiveVerdict(BOB, Judgement.Verdict.FALSE_MATCH, None, NURSE.id)
    done = effects(state(rejected, status=ReviewItem.Status.AWAITING_GROUP), "confirm")
    assert (done.group_id, done.rejected_group_id) == (MIDWIFE.id, None)
    # The prediction matched no member string for it: the pair holds the group's name.
    assert done.pairs == (PairEffect(MIDWIFE.id, None, True, "confirm"),)
    assert (done.status, done.conflict) == (ReviewItem.Status.DONE, False)
    assert (done.top_group_id, done.top_score) == (MIDWIFE.id, 0.7)


def test_a_false_match_rejects_the_prediction_and_names_the_next_group_the_answer():
    done = effects(state(), "false_match")
    assert (done.group_id, done.rejected_group_id) == (None, NURSE.id)
    assert done.pairs == (PairEffect(NURSE.id, "Staff Nurse", False, "false_match"),)
    assert done.status == ReviewItem.Status.AWAITING_GROUP
    assert (done.top_group_id, done.top_score) == (MIDWIFE.id, 0.7)


def test_a_reassign_after_a_false_match_does_not_count_the_wrong_group_twice():
    rejected = LiveVerdict(ANN, Judgement.Verdict.FALSE_MATCH, None, NURSE.id)
    done = effects(state(rejected, status=ReviewItem.Status.AWAITING_GROUP), "reassign", COOK)
    assert (done.group_id, done.rejected_group_id) == (COOK.id, None)
    assert done.pairs == (PairEffect(COOK.id, None, True, "reassign"),)
    fresh = effects(state(), "reassign", COOK)
    assert fresh.rejected_group_id == NURSE.id
    assert fresh.pairs[1] == PairEffect(NURSE.id, "Staff Nurse", False, "reassign_negative")


def test_none_of_these_leaves_no_answer():
    done = effects(state(), "none")
    assert (done.status, done.top_group_id, done.top_score) == (ReviewItem.Status.DONE, None, None)
    assert done.pairs == (PairEffect(NURSE.id, "Staff Nurse", False, "false_match"),)


def test_on_double_review_the_second_curator_judges_apart_and_disagreement_is_a_conflict():
    first = LiveVerdict(ANN, Judgement.Verdict.FALSE_MATCH, None, NURSE.id)
    item = state(first, reviews_required=2, status=ReviewItem.Status.AWAITING_GROUP)
    # Ann's rejection is not Bob's: he may confirm the group she rejected.
    bob = effects(item, "confirm", NURSE, user_id=BOB)
    assert (bob.status, bob.conflict) == (ReviewItem.Status.PENDING, False)
    assert (bob.top_group_id, bob.top_score) == (NURSE.id, 0.9)  # the prediction's best
    ann_confirmed = LiveVerdict(ANN, Judgement.Verdict.CONFIRM, MIDWIFE.id, None)
    both = effects(state(ann_confirmed, reviews_required=2), "confirm", NURSE, user_id=BOB)
    assert (both.status, both.conflict) == (ReviewItem.Status.DONE, True)
    agreed = effects(state(ann_confirmed, reviews_required=2), "confirm", MIDWIFE, user_id=BOB)
    assert (agreed.status, agreed.conflict, agreed.top_group_id) == (
        ReviewItem.Status.DONE,
        False,
        MIDWIFE.id,
    )


@pytest.mark.parametrize(
    ("item", "verdict", "group", "field", "message"),
    [
        (state(status=ReviewItem.Status.DONE), "confirm", None, "review_item", "already been"),
        (
            state(leased_by_id=BOB, lease_expires_at=NOW + timedelta(minutes=1)),
            "confirm",
            None,
            "review_item",
            "another curator",
        ),
        (
            state(LiveVerdict(ANN, Judgement.Verdict.CONFIRM, NURSE.id, None), reviews_required=2),
            "reassign",
            COOK,
            "review_item",
            "already judged",
        ),
        (
            state(LiveVerdict(BOB, Judgement.Verdict.FALSE_MATCH, None, NURSE.id)),
            "confirm",
            NURSE,
            "group",
            "was rejected for this input",
        ),
        (state(), "none", COOK, "group", "takes no group"),
        (state(), "reassign", None, "group", "needs the group"),
        (state(), "confirm", Group(id=9, taxonomy_id=8, code="x", name="X"), "group", "not in"),
        (state(), "shrug", None, "verdict", "unknown verdict"),
    ],
)
def test_a_verdict_that_does_not_fit_the_item_is_refused(item, verdict, group, field, message):
    with pytest.raises(VerdictError, match=message) as error:
        effects(item, verdict, group)
    assert error.value.field == field


def test_a_skip_sent_twice_is_refused_but_a_later_pass_may_skip_again():
    skipped = LiveVerdict(ANN, Judgement.Verdict.SKIP, None, None)
    item = state(skipped, status=ReviewItem.Status.SKIPPED)
    with pytest.raises(VerdictError, match="skipped this item already"):
        effects(item, "skip")
    leased = state(skipped, status=ReviewItem.Status.SKIPPED, leased_by_id=ANN)
    assert effects(leased, "skip").status == ReviewItem.Status.SKIPPED


def rows(item: ReviewItem, user) -> dict:
    """What ``user``'s verdict left of the item and its rows."""
    item.refresh_from_db()
    judgement = Judgement.objects.get(review_item=item, user=user)
    return {
        "item": (item.status, item.conflict, item.top_group_id, item.top_score),
        "judgement": (judgement.verdict, judgement.group_id, judgement.rejected_group_id),
        "pairs": sorted(
            FeedbackPair.objects.filter(judgement=judgement).values_list(
                "text_a", "text_b", "group_id", "label", "origin"
            )
        ),
        "members": sorted(
            Member.objects.filter(judgement=judgement).values_list("text", "group_id", "source")
        ),
    }


@pytest.mark.parametrize("verdict", ["confirm", "false_match"])
@pytest.mark.parametrize(
    ("reviews_required", "other_first"),
    [(1, None), (1, "false_match"), (2, None), (2, "confirm"), (2, "none"), (2, "false_match")],
)
def test_the_card_and_the_batch_leave_the_same_rows(
    tiny_taxonomy, curator, other_curator, verdict, reviews_required, other_first
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    ReviewItem.objects.filter(id=item.id).update(reviews_required=reviews_required)
    item.refresh_from_db()
    if other_first:
        judgement_create(review_item=item, user=other_curator, verdict=other_first)
        item.refresh_from_db()
    # The grid shows the items whose answer is its group.
    group = Group.objects.get(id=item.top_group_id)
    with transaction.atomic():
        judgement_create(review_item=item, user=curator, verdict=verdict, group=group)
        by_card = rows(item, curator)
        transaction.set_rollback(True)
    confirmed, rejected = ([item.id], []) if verdict == "confirm" else ([], [item.id])
    judgements_create_for_group(
        user=curator, group=group, confirm_item_ids=confirmed, reject_item_ids=rejected
    )
    assert rows(item, curator) == by_card
