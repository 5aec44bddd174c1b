"""A sampled share of items is judged twice; disagreements are flagged for an admin, and
per-curator agreement is measured on those items."""

from __future__ import annotations

import pytest

from annotations.models import Group, Judgement, Member, ReviewItem
from annotations.selectors.card import review_card_groups, review_card_members
from annotations.selectors.queue import review_conflicts
from annotations.selectors.stats import curator_stats, review_counts
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.undo import review_conflict_resolve
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create


@pytest.fixture
def double_review(settings):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100


@pytest.fixture
def item(tiny_taxonomy, double_review) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    return item


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def test_a_sampled_item_waits_for_a_second_curator(item, curator, other_curator):
    assert item.reviews_required == 2
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING
    # The first curator is done with it; the second one gets it.
    assert review_item_claim(user=curator) is None
    assert review_item_claim(user=other_curator).id == item.id


def test_a_curator_cannot_judge_the_same_item_twice(item, curator):
    judgement_create(review_item=item, user=curator, verdict="none")
    with pytest.raises(VerdictError, match="already judged"):
        judgement_create(review_item=item, user=curator, verdict="confirm")


def test_agreeing_curators_close_the_item(item, curator, other_curator):
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    judgement_create(
        review_item=item, user=other_curator, verdict="reassign", group=group("35-3023")
    )
    item.refresh_from_db()
    assert (item.status, item.conflict) == (ReviewItem.Status.DONE, False)
    stats = {row["username"]: row for row in curator_stats()}
    assert stats["carla"] == {
        "username": "carla",
        "verdicts": 1,
        "today": 1,
        "last_7_days": 1,
        "per_day": 1.0,
        "reversal_rate": 0.0,
        "seen_twice": 1,
        "agreement": 1.0,
        "overruled": 0,
    }
    assert stats["oscar"]["agreement"] == 1.0


def test_disagreeing_curators_flag_the_item_for_an_admin(item, curator, other_curator):
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    judgement_create(review_item=item, user=other_curator, verdict="none")
    item.refresh_from_db()
    assert (item.status, item.conflict) == (ReviewItem.Status.DONE, True)
    assert [i.id for i in review_conflicts()] == [item.id]
    assert review_counts()["conflicts"] == 1
    stats = {row["username"]: row for row in curator_stats()}
    assert (stats["carla"]["seen_twice"], stats["carla"]["agreement"]) == (1, 0.0)


def test_an_admin_settles_a_conflict_and_the_losing_verdict_is_undone(
    item, curator, other_curator, admin_user
):
    barista = group("35-3023")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=barista)
    losing = judgement_create(review_item=item, user=other_curator, verdict="none")

    review_conflict_resolve(item=item, user=admin_user, group=barista)

    item.refresh_from_db()
    losing.refresh_from_db()
    assert (item.status, item.conflict) == (ReviewItem.Status.DONE, False)
    assert losing.undone_at is not None
    assert Member.objects.filter(source="curator", group=barista, text="Java Barista").exists()
    assert not review_conflicts().exists()
    # Settled, the disagreement still counts: oscar was overruled, not taken back.
    stats = {row["username"]: row for row in curator_stats()}
    assert {
        name: (row["seen_twice"], row["agreement"], row["reversal_rate"], row["overruled"])
        for name, row in stats.items()
    } == {"carla": (1, 0.0, 0.0, 0), "oscar": (1, 0.0, 0.0, 1)}


def test_an_admins_settlement_on_a_third_group_is_no_third_curator(
    item, curator, other_curator, admin_user
):
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    judgement_create(review_item=item, user=other_curator, verdict="none")
    review_conflict_resolve(item=item, user=admin_user, group=group("13-2011"))
    stats = {row["username"]: row for row in curator_stats()}
    assert (stats["carla"]["seen_twice"], stats["carla"]["overruled"]) == (1, 1)
    assert (stats["oscar"]["seen_twice"], stats["oscar"]["overruled"]) == (1, 1)
    # The admin's verdict stands and counts as one, but compares with no one.
    assert (stats["ada"]["verdicts"], stats["ada"]["seen_twice"]) == (1, 0)


def test_an_admin_may_settle_on_a_group_neither_curator_chose(
    item, curator, other_curator, admin_user
):
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    judgement_create(review_item=item, user=other_curator, verdict="none")

    review_conflict_resolve(item=item, user=admin_user, group=group("13-2011"))

    live = Judgement.objects.live().filter(verdict__in=Judgement.FINAL_VERDICTS)
    assert list(live.values_list("user__username", "group__code")) == [("ada", "13-2011")]
    assert list(Member.objects.filter(source="curator").values_list("group__code", flat=True)) == [
        "13-2011"
    ]


def test_a_curator_cannot_settle_a_conflict(item, curator, other_curator):
    judgement_create(review_item=item, user=curator, verdict="none")
    judgement_create(
        review_item=item, user=other_curator, verdict="reassign", group=group("15-1252")
    )
    with pytest.raises(VerdictError, match="only an admin"):
        review_conflict_resolve(item=item, user=curator, group=None)
    item.refresh_from_db()
    assert item.conflict


def test_the_second_curator_judges_without_the_first_ones_rejections(item, curator, other_curator):
    predicted = item.top_group
    judgement_create(review_item=item, user=curator, verdict="none")
    assert predicted.id in {g["group_id"] for g in review_card_groups(item, user=other_curator)}
    judgement_create(review_item=item, user=other_curator, verdict="confirm")
    item.refresh_from_db()
    assert item.conflict


def test_settlements_made_before_the_mark_are_marked_from_their_audit_events(
    item, curator, other_curator, admin_user
):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("annotations.migrations.0016_judgement_settlement")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    judgement_create(review_item=item, user=other_curator, verdict="none")
    review_conflict_resolve(item=item, user=admin_user, group=group("13-2011"))
    marked = dict(Judgement.objects.values_list("id", "settlement"))
    assert sorted(marked.values()) == ["overruled", "overruled", "settled"]
    Judgement.objects.update(settlement="")  # as the rows stood before the migration

    migration.mark_earlier_settlements(apps, None)

    assert dict(Judgement.objects.values_list("id", "settlement")) == marked


def test_the_second_curator_sees_nothing_of_where_the_first_put_the_text(
    item, curator, other_curator
):
    """The first verdict stores the text as a member of its group at once; neither the card's
    other members nor a new ranking of the text (it is sent again) may show it."""
    first = item.prediction_id
    nurses = group("29-1141")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=nurses)
    assert Member.objects.filter(group=nurses, text="Java Barista").exists()

    (again,) = inputs_submit(taxonomy=item.taxonomy, texts=["Java Barista"], source="api")
    assert (again.id, again.prediction_id, again.status) == (item.id, first, "pending")
    groups = review_card_groups(again, user=other_curator)
    assert all(g["source"] == "model" for g in groups)
    members = review_card_members(groups=groups, text="Java Barista")
    assert all("Java Barista" not in texts for texts in members.values())
