"""The queue asks first what teaches most: the live ranker's doubt times the text's traffic,
near-copies of one title spread out, ordered again after each new ranker at a bounded cost,
and an order interrupted half-way leaves the last one whole."""

from __future__ import annotations

import numpy as np
import pytest

from annotations.models import ReviewItem
from annotations.services.review import queue_order
from annotations.services.review.inputs import (
    CHANGED_ANSWER_PRIORITY,
    inputs_submit,
    review_priorities,
    review_priority,
)
from annotations.services.review.leases import review_item_claim
from annotations.services.review.queue_order import review_items_reorder
from models_app.serving.normalize import Normalization, RankedGroup, rank_taxonomy_groups
from models_app.siamese.ranker.active import SPREAD, spread_near_copies, verdict_worth
from tests.test_match_probability import judge_all

COPIES = [f"Java Developer {level}" for level in ("I", "II", "III", "Senior", "Lead", "Junior")]
OTHERS = ["Payroll Clerk", "Coffee Roaster", "ER Nurse", "Bus Driver"]


def test_a_verdict_is_worth_the_chance_the_answer_is_wrong_weighed_by_traffic():
    worth = verdict_worth(np.array([0.9, 0.2, 0.2, 1.0]), np.array([1, 1, 20, 50]))
    assert worth[0] == pytest.approx(0.1) and worth[1] == pytest.approx(0.8)
    assert worth[2] > worth[1] > worth[0] and worth[3] == 0.0


def test_each_more_worthy_copy_in_the_same_group_spreads_a_text_down():
    spread = spread_near_copies(np.array([1.0, 0.9, 0.8, 0.5, 0.95]), np.array([3, 3, 3, 1, 1]))
    assert spread.tolist() == pytest.approx(
        [1.0, 0.9 * SPREAD, 0.8 * SPREAD**2, 0.5 * SPREAD, 0.95]
    )
    assert spread_near_copies(np.zeros(0), np.zeros(0)).tolist() == []


def answer(probability, *scores):
    groups = [RankedGroup(i, f"c{i}", f"g{i}", score, None, None, "model") for i, score in
              enumerate(scores)]  # fmt: skip
    return Normalization("t", groups, "model", "v1", 1, probability=probability)


def test_many_answers_are_worth_what_each_is_worth_alone():
    answers = [answer(0.9, 0.8, 0.5), answer(None, 0.8, 0.5), answer(None, 0.3), answer(0.2, 0.6)]
    occurrences = [1, 3, 1, 20]
    worth = review_priorities(answers, occurrences)
    alone = [
        review_priority(a, n, changed=False) for a, n in zip(answers, occurrences, strict=True)
    ]
    assert worth.tolist() == pytest.approx(alone)
    # Without a probability: a small margin, a low top score and traffic come first.
    assert worth[1] == pytest.approx((1 - 0.3) + (1 - 0.8) + 0.1 * np.log1p(3))
    assert worth[2] == pytest.approx((1 - 0.3) + (1 - 0.3) + 0.1 * np.log1p(1))
    assert worth[0] == pytest.approx(0.1) and worth[3] == pytest.approx(0.8 * (1 + np.log(20)))
    changed = review_priority(answers[0], 1, changed=True)
    assert changed == pytest.approx(0.1 + CHANGED_ANSWER_PRIORITY)


def test_a_new_item_is_queued_by_what_its_verdict_is_worth(tiny_taxonomy):
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=OTHERS, source="api")
    answers = rank_taxonomy_groups(tiny_taxonomy, OTHERS, k=5)
    for item, answer in zip(items, answers, strict=True):
        item.refresh_from_db()
        expected = verdict_worth(np.array([answer.probability]), np.array([1]))[0]
        assert item.priority == pytest.approx(expected, abs=1e-6)


def test_after_a_new_ranker_the_queue_is_ordered_again_near_copies_spread(tiny_taxonomy, curator):
    inputs_submit(taxonomy=tiny_taxonomy, texts=COPIES + OTHERS, source="api")
    judge_all(tiny_taxonomy, curator)  # a ranker of the taxonomy's own is fitted and live
    assert review_items_reorder(taxonomy=tiny_taxonomy) == len(COPIES) + len(OTHERS)

    open_items = ReviewItem.objects.filter(
        taxonomy=tiny_taxonomy, status__in=ReviewItem.OPEN_STATUSES
    ).select_related("input")
    texts = [item.input.text for item in open_items]
    answers = {a.text: a for a in rank_taxonomy_groups(tiny_taxonomy, texts, k=2)}
    worth = {
        item.input.text: review_priority(answers[item.input.text], 1, changed=False)
        for item in open_items
    }
    # Each priority is its worth under the new ranker, spread by more worthy texts of its group.
    for item in open_items:
        group = answers[item.input.text].groups[0].group_id
        ahead = sum(
            worth[other] > worth[item.input.text]
            for other in texts
            if answers[other].groups[0].group_id == group
        )
        assert item.priority == pytest.approx(worth[item.input.text] * SPREAD**ahead, rel=1e-6)
    # Six copies of one title in one group do not come first in a row.
    claimed = []
    for _ in range(4):
        card = review_item_claim(user=curator)
        claimed.append(card.top_group_id)
        card.status = ReviewItem.Status.DONE
        card.save(update_fields=["status"])
    assert len(set(claimed)) > 1


def test_the_cost_is_bounded_head_first_then_those_ordered_longest_ago(tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=COPIES + OTHERS, source="api")
    items = ReviewItem.objects.filter(taxonomy=tiny_taxonomy)
    head = list(items.order_by("-priority", "id").values_list("id", flat=True)[:3])
    oldest = items.exclude(id__in=head).order_by("updated_at", "id").first()
    chosen = queue_order.review_items_to_reorder(taxonomy=tiny_taxonomy, limit=4)
    assert [item.id for item in chosen] == [*head, oldest.id]
    assert review_items_reorder(taxonomy=tiny_taxonomy, limit=4) == 4


def test_an_order_interrupted_half_way_leaves_the_last_one_whole(tiny_taxonomy, monkeypatch):
    inputs_submit(taxonomy=tiny_taxonomy, texts=COPIES + OTHERS, source="api")
    before = dict(ReviewItem.objects.values_list("id", "priority"))
    calls = []

    def fails_on_the_second_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("worker lost")
        return rank_taxonomy_groups(*args, **kwargs)

    monkeypatch.setattr(queue_order, "rank_taxonomy_groups", fails_on_the_second_chunk)
    monkeypatch.setattr(queue_order, "_CHUNK", 4)
    with pytest.raises(RuntimeError):
        review_items_reorder(taxonomy=tiny_taxonomy)
    assert dict(ReviewItem.objects.values_list("id", "priority")) == before


def test_an_item_judged_while_the_queue_is_ordered_keeps_what_its_verdict_wrote(
    tiny_taxonomy, monkeypatch
):
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=COPIES + OTHERS, source="api")
    judged = items[0]

    def judged_meanwhile(*args, **kwargs):
        ReviewItem.objects.filter(id=judged.id).update(status=ReviewItem.Status.DONE, priority=-7.0)
        return rank_taxonomy_groups(*args, **kwargs)

    monkeypatch.setattr(queue_order, "rank_taxonomy_groups", judged_meanwhile)
    stamped_before = dict(ReviewItem.objects.values_list("id", "updated_at"))
    assert review_items_reorder(taxonomy=tiny_taxonomy) == len(items) - 1
    judged.refresh_from_db()
    assert (judged.status, judged.priority) == (ReviewItem.Status.DONE, -7.0)
    others = ReviewItem.objects.exclude(id=judged.id)
    assert all(item.updated_at > stamped_before[item.id] for item in others)
    assert all(item.priority > 0 for item in others)
