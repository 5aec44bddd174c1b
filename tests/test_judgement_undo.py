"""Undo takes a verdict back completely: pairs, curator member, status; the audit keeps it."""

from __future__ import annotations

import pytest

from annotations.models import AuditEvent, FeedbackPair, Group, Judgement, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create
from models_app.serving.normalize import rank_taxonomy_groups


@pytest.fixture
def item(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    return item


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def test_undoing_a_reassign_removes_its_member_and_pairs(tiny_taxonomy, item, curator):
    # The model says Baristas; the curator says software developer.
    assert item.top_group.code == "35-3023"
    judgement = judgement_create(
        review_item=item, user=curator, verdict="reassign", group=group("15-1252")
    )
    assert FeedbackPair.objects.count() == 2

    judgement_undo(judgement=judgement, user=curator)

    item.refresh_from_db()
    judgement.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING
    assert judgement.undone_at is not None
    assert not FeedbackPair.objects.exists()
    assert not Member.objects.filter(source="curator").exists()
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Java Barista"], k=3)
    assert result.source == "model"


def test_the_undone_card_comes_back_to_its_curator(item, curator, other_curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_undo(judgement=judgement, user=curator)
    assert review_item_claim(user=other_curator) is None
    assert review_item_claim(user=curator).id == item.id


def test_undoing_a_false_match_offers_the_group_again(tiny_taxonomy, item, curator):
    predicted = item.top_group
    judgement = judgement_create(review_item=item, user=curator, verdict="false_match")
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Java Barista"], k=5)
    assert predicted.code not in [g.code for g in result.groups]

    judgement_undo(judgement=judgement, user=curator)

    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Java Barista"], k=5)
    assert predicted.code in [g.code for g in result.groups]
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


def test_after_undo_the_item_can_be_judged_again(item, curator):
    first = judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_undo(judgement=first, user=curator)
    second = judgement_create(review_item=item, user=curator, verdict="none")
    assert list(Judgement.objects.live().values_list("id", flat=True)) == [second.id]


def test_only_the_latest_verdict_on_an_item_can_be_undone(item, curator):
    false_match = judgement_create(review_item=item, user=curator, verdict="false_match")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("15-1252"))
    with pytest.raises(VerdictError, match="later verdict"):
        judgement_undo(judgement=false_match, user=curator)
    assert Judgement.objects.live().count() == 2


def test_a_curator_cannot_undo_someone_elses_verdict(item, curator, other_curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    with pytest.raises(VerdictError, match="only its curator"):
        judgement_undo(judgement=judgement, user=other_curator)
    assert Member.objects.filter(source="curator").count() == 1


def test_an_admin_can_undo_a_curators_verdict(item, curator, admin_user):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_undo(judgement=judgement, user=admin_user)
    assert not Member.objects.filter(source="curator").exists()


def test_undoing_twice_is_refused(item, curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_undo(judgement=judgement, user=curator)
    with pytest.raises(VerdictError, match="already undone"):
        judgement_undo(judgement=judgement, user=curator)


def test_verdicts_and_undos_are_in_the_audit_trail(item, curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_undo(judgement=judgement, user=curator)
    events = list(
        AuditEvent.objects.filter(object_type="judgement")
        .order_by("id")
        .values("action", "actor", "before", "after")
    )
    assert [e["action"] for e in events] == ["judgement.create", "judgement.undo"]
    assert all(e["actor"] == curator.id for e in events)
    assert events[0]["after"]["verdict"] == "confirm"
    assert events[0]["after"]["input"] == "Java Barista"
    assert events[1]["before"]["verdict"] == "confirm"
    assert events[1]["after"]["status"] == "pending"
