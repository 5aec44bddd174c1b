"""A retried verdict is recorded once; batch review is all or nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.models import AuditEvent, FeedbackPair, Group, Judgement, Member, ReviewItem
from annotations.services.review.batch import judgements_create_for_group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


@pytest.fixture
def item(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    return item


def test_a_retried_verdict_with_the_same_key_is_recorded_once(item, curator):
    first = judgement_create(
        review_item=item, user=curator, verdict="confirm", idempotency_key="k1"
    )
    again = judgement_create(
        review_item=item, user=curator, verdict="confirm", idempotency_key="k1"
    )
    assert (first.replayed, again.replayed, again.id) == (False, True, first.id)
    assert Judgement.objects.count() == 1
    assert FeedbackPair.objects.count() == 1


def test_a_key_reused_for_another_verdict_is_refused(tiny_taxonomy, item, curator):
    judgement_create(review_item=item, user=curator, verdict="confirm", idempotency_key="k1")
    (other,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Tax Accountant II"], source="api")
    with pytest.raises(VerdictError) as error:
        judgement_create(review_item=other, user=curator, verdict="none", idempotency_key="k1")
    assert (error.value.field, error.value.conflict) == ("idempotency_key", True)
    assert not other.judgements.exists()


def test_keys_belong_to_one_curator(tiny_taxonomy, curator, other_curator):
    first, second = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Engineer", "Staff Nurse II"], source="api"
    )
    judgement_create(review_item=first, user=curator, verdict="confirm", idempotency_key="same")
    judgement_create(
        review_item=second, user=other_curator, verdict="confirm", idempotency_key="same"
    )
    assert Judgement.objects.count() == 2


@pytest.fixture
def developer_items(tiny_taxonomy) -> list[ReviewItem]:
    texts = ["Java Engineer", "Senior Java Engineer", "Python Engineer", "Java Barista"]
    inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")
    return list(ReviewItem.objects.filter(top_group=group("15-1252")).order_by("id"))


def test_a_batch_confirms_some_items_and_rejects_others(developer_items, curator):
    developers = group("15-1252")
    *keep, wrong = developer_items
    result = judgements_create_for_group(
        user=curator,
        group=developers,
        confirm_item_ids=[i.id for i in keep],
        reject_item_ids=[wrong.id],
    )
    assert len(result.confirmed) == len(keep)
    assert [j.verdict for j in result.rejected] == ["false_match"]
    statuses = dict(ReviewItem.objects.values_list("id", "status"))
    assert {statuses[i.id] for i in keep} == {"done"}
    assert statuses[wrong.id] == "awaiting_group"
    assert Member.objects.filter(source="curator", group=developers).count() == len(keep)
    assert FeedbackPair.objects.filter(label=False, text_a=wrong.input.text).count() == 1
    # As after one false match at a time, the rejected group is no longer the item's answer.
    wrong.refresh_from_db()
    assert wrong.top_group_id == wrong.prediction.ranked_groups[1]["group_id"] != developers.id


def test_a_batch_with_one_stale_item_changes_nothing(developer_items, curator):
    developers = group("15-1252")
    stale = developer_items[0]
    ReviewItem.objects.filter(id=stale.id).update(top_group=group("35-3023"))
    with pytest.raises(VerdictError, match="no longer predicted"):
        judgements_create_for_group(
            user=curator,
            group=developers,
            confirm_item_ids=[i.id for i in developer_items],
            reject_item_ids=[],
        )
    assert not Judgement.objects.exists()
    assert not Member.objects.filter(source="curator").exists()


def test_an_item_both_confirmed_and_rejected_is_refused(developer_items, curator):
    with pytest.raises(VerdictError, match="both confirmed and rejected"):
        judgements_create_for_group(
            user=curator,
            group=group("15-1252"),
            confirm_item_ids=[developer_items[0].id],
            reject_item_ids=[developer_items[0].id],
        )
    assert not Judgement.objects.exists()


def test_a_batch_writes_its_verdicts_in_the_same_statements_whatever_its_size(
    tiny_taxonomy, curator, other_curator
):
    """A grid of 60 took a statement a row a verdict (480); now each table is written once."""
    texts = [f"Java Engineer {n}" for n in range(12)]
    inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")
    developers = group("15-1252")
    items = list(ReviewItem.objects.filter(top_group=developers).order_by("id"))
    assert len(items) == len(texts)
    counts = []
    for user, chosen in ((curator, items[:2]), (other_curator, items[2:])):
        with CaptureQueriesContext(connection) as statements:
            result = judgements_create_for_group(
                user=user,
                group=developers,
                confirm_item_ids=[i.id for i in chosen[1:]],
                reject_item_ids=[chosen[0].id],
            )
        assert len(result.confirmed) + len(result.rejected) == len(chosen)
        counts.append(len(statements.captured_queries))
    assert counts[0] == counts[1]
    # Every row a verdict leaves was written: one member, pair and event for each.
    confirmed = [i for chosen in (items[:2], items[2:]) for i in chosen[1:]]
    assert Member.objects.filter(source="curator", group=developers).count() == len(confirmed)
    assert FeedbackPair.objects.count() == len(items)
    assert AuditEvent.objects.filter(action="judgement.create").count() == len(items)
    done = ReviewItem.objects.filter(id__in=[i.id for i in confirmed], status="done")
    assert done.count() == len(confirmed)
    assert all(item.updated_at > item.created_at for item in done)


def test_a_member_the_group_already_holds_is_kept_as_it_is(developer_items, curator):
    developers = group("15-1252")
    first = developer_items[0]
    taken = Member.objects.create(
        taxonomy=developers.taxonomy,
        group=developers,
        text="taken before",
        normalized_text=first.input.normalized_text,
        source="curator",
    )
    judgements_create_for_group(
        user=curator, group=developers, confirm_item_ids=[first.id], reject_item_ids=[]
    )
    taken.refresh_from_db()
    assert taken.text == "taken before" and taken.judgement_id is None
    assert (
        Member.objects.filter(group=developers, normalized_text=taken.normalized_text).count() == 1
    )
