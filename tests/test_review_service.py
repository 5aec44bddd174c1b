from __future__ import annotations

import pytest

from annotations.models import FeedbackPair, Group, Input, Judgement, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create
from models_app.models import TrainingRun
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.training.services.indexes import taxonomy_needs_reindex
from worker import tasks


@pytest.fixture
def item(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    return item


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def pairs():
    return sorted(FeedbackPair.objects.values_list("text_a", "text_b", "label", "origin"))


def top(taxonomy, text):
    (result,) = rank_taxonomy_groups(taxonomy, [text], k=3)
    return result


def test_submitting_stores_input_prediction_and_queues_it(item):
    assert item.status == ReviewItem.Status.PENDING
    assert item.prediction.top_group.code == "15-1252"
    assert item.prediction.model_version.label == "jobs/v1"
    assert item.prediction.ranked_groups[0]["member"] == "Java Software Engineer"
    assert item.prediction.margin == pytest.approx(
        item.prediction.ranked_groups[0]["score"] - item.prediction.ranked_groups[1]["score"]
    )


def test_submitting_a_known_text_counts_an_occurrence_not_a_new_input(tiny_taxonomy, item):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["senior  JAVA engineer"], source="api")
    assert Input.objects.count() == 1
    assert Input.objects.get().occurrences == 2
    assert ReviewItem.objects.count() == 1


def test_confirm_adds_a_curator_member_and_a_positive_pair(item, curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    assert (judgement.verdict, judgement.group.code, judgement.user) == (
        "confirm",
        "15-1252",
        curator,
    )
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.DONE
    member = Member.objects.get(source="curator")
    assert (member.text, member.group.code, member.added_by) == (
        "Senior Java Engineer",
        "15-1252",
        curator,
    )
    assert pairs() == [("Senior Java Engineer", "Java Software Engineer", True, "confirm")]


def test_a_reassigned_input_normalizes_to_its_new_group_at_once(tiny_taxonomy, curator):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    result = top(tiny_taxonomy, "java barista")
    assert (result.source, result.groups[0].code, result.groups[0].source) == (
        "curator",
        "35-3023",
        "curator",
    )
    assert result.groups[0].member == "Java Barista"
    assert [g.code for g in result.groups].count("35-3023") == 1


def test_reassign_stores_a_positive_and_a_hard_negative(item, curator):
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    assert pairs() == [
        ("Senior Java Engineer", "Baristas", True, "reassign"),
        ("Senior Java Engineer", "Java Software Engineer", False, "reassign_negative"),
    ]
    judgement = Judgement.objects.get()
    assert (judgement.group.code, judgement.rejected_group.code) == ("35-3023", "15-1252")


def test_a_false_match_is_never_offered_again_for_that_input(tiny_taxonomy, item, curator):
    assert top(tiny_taxonomy, "Senior Java Engineer").groups[0].code == "15-1252"
    judgement_create(review_item=item, user=curator, verdict="false_match")
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.AWAITING_GROUP
    assert pairs() == [("Senior Java Engineer", "Java Software Engineer", False, "false_match")]
    codes = [g.code for g in top(tiny_taxonomy, "senior java engineer").groups]
    assert "15-1252" not in codes
    # Other inputs still see the group.
    assert top(tiny_taxonomy, "Java Engineer").groups[0].code == "15-1252"


def test_after_a_false_match_the_item_waits_for_the_right_group(item, curator):
    judgement_create(review_item=item, user=curator, verdict="false_match")
    assert review_item_claim(user=curator).id == item.id
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("13-2011"))
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.DONE
    # The wrong group was recorded once, by the false match.
    assert FeedbackPair.objects.filter(label=False).count() == 1


def test_a_verdict_serves_at_once_without_a_rebuild_and_the_schedule_indexes_it(item, curator):
    nurses = group("29-1141")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=nurses)
    # No run per verdict: the live engine serves the curator member from its delta ...
    assert not TrainingRun.objects.filter(status="queued").exists()
    (result,) = rank_taxonomy_groups(item.taxonomy, [item.input.text], k=1)
    assert (result.source, result.groups[0].code) == ("curator", "29-1141")
    # ... and the scheduled check folds it into the index with the others waiting.
    assert taxonomy_needs_reindex(item.taxonomy)
    assert tasks.reindex_stale_taxonomies.run() == 1
    (run,) = TrainingRun.objects.filter(status="queued")
    assert (run.kind, run.trigger) == ("reindex", "schedule")


def test_skip_moves_the_item_behind_the_others(tiny_taxonomy, curator):
    first, second = inputs_submit(taxonomy=tiny_taxonomy, texts=["nurse", "truck"], source="api")
    head = review_item_claim(user=curator)
    judgement_create(review_item=head, user=curator, verdict="skip")
    assert review_item_claim(user=curator).id != head.id
    assert {first.id, second.id} == {head.id, review_item_claim(user=curator).id}


@pytest.mark.parametrize(
    ("verdict", "group_code", "field", "message"),
    [
        ("reassign", None, "group", "reassign needs the group"),
        ("maybe", None, "verdict", "unknown verdict 'maybe'"),
    ],
)
def test_impossible_verdicts_are_refused_and_store_nothing(
    item, curator, verdict, group_code, field, message
):
    with pytest.raises(VerdictError, match=message) as error:
        judgement_create(review_item=item, user=curator, verdict=verdict)
    assert error.value.field == field
    assert not Judgement.objects.exists()
    assert not FeedbackPair.objects.exists()


def test_a_group_of_another_taxonomy_is_refused(item, curator):
    from annotations.services.taxonomy import taxonomy_import
    from tests.conftest import TINY_CSV

    taxonomy_import(slug="other", path=TINY_CSV, fmt="csv")
    foreign = Group.objects.get(taxonomy__slug="other", code="35-3023")
    with pytest.raises(VerdictError, match="not in taxonomy jobs"):
        judgement_create(review_item=item, user=curator, verdict="reassign", group=foreign)
    assert not Member.objects.filter(source="curator").exists()


def test_a_done_item_cannot_be_judged_twice(item, curator, other_curator):
    judgement_create(review_item=item, user=curator, verdict="confirm")
    with pytest.raises(VerdictError, match="already been judged"):
        judgement_create(review_item=item, user=other_curator, verdict="false_match")
    assert Judgement.objects.count() == 1


def test_a_group_rejected_for_an_input_cannot_then_be_confirmed_for_it(item, curator):
    judgement_create(review_item=item, user=curator, verdict="false_match")
    with pytest.raises(VerdictError, match="was rejected for this input"):
        judgement_create(review_item=item, user=curator, verdict="confirm", group=group("15-1252"))
    with pytest.raises(VerdictError, match="already marked a false match"):
        judgement_create(review_item=item, user=curator, verdict="false_match")
    assert Judgement.objects.count() == 1
    assert FeedbackPair.objects.count() == 1
    assert not Member.objects.filter(source="curator").exists()


def test_a_verdict_on_a_replaced_prediction_is_refused(tiny_taxonomy, item, curator):
    shown = item.prediction_id
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    item.refresh_from_db()
    assert item.prediction_id != shown
    with pytest.raises(VerdictError, match="prediction changed") as error:
        judgement_create(review_item=item, user=curator, verdict="confirm", prediction_id=shown)
    assert error.value.field == "prediction"
    assert not Judgement.objects.exists()
