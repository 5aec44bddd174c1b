"""Group edits: a group created, renamed, merged into another (members, review items, predictions,
verdicts, pairs and relations follow); each audited, bad input refused whole."""

from __future__ import annotations

import pytest

from annotations.models import (
    FeedbackPair,
    Group,
    GroupRelation,
    Member,
    Prediction,
    ReviewItem,
)
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.groups import group_create, group_merge, group_rename
from annotations.services.taxonomy_edit.members import member_add
from models_app.training.services.indexes import taxonomy_needs_reindex
from tests.conftest import TINY_CSV
from tests.taxonomy_edit.conftest import (
    BARISTAS,
    DEVS,
    DRIVERS,
    NURSES,
    events,
    group,
    reindex_queued,
    served,
    served_at_once_without_a_run,
    snapshot,
    texts_of,
)

# --- group_create / group_rename ------------------------------------------------------------


def test_creating_a_group_stores_it_empty_and_audits_it(tiny_taxonomy, admin_user):
    created = group_create(
        taxonomy=tiny_taxonomy, code=" 15-1253.00 ", name="Software  Testers", user=admin_user
    )
    assert (created.code, created.name) == ("15-1253.00", "Software Testers")
    assert group("15-1253.00").members.count() == 0
    (event,) = events("group.create")
    assert (event.actor, event.taxonomy, event.object_id) == (
        admin_user,
        tiny_taxonomy,
        str(created.id),
    )
    assert event.before is None
    assert event.after == {"code": "15-1253.00", "name": "Software Testers"}
    # No members changed: nothing to reindex.
    assert not reindex_queued()


@pytest.mark.parametrize(
    ("code", "name", "field", "message"),
    [
        (DEVS, "Another", "code", "already taken"),
        ("", "Testers", "code", "code is empty"),
        ("a/b", "Testers", "code", "may not contain '/'"),
        # A browser reads a path segment "." or ".." as a step: the group's page would not open.
        (".", "Testers", "code", r"code '\.' may not be '\.' or '\.\.'"),
        (" .. ", "Testers", "code", r"code '\.\.' may not be '\.' or '\.\.'"),
        ("x" * 65, "Testers", "code", "longer than 64"),
        ("99-0001", "   ", "name", "name is empty"),
        ("99-0001", "Test\x00ers", "name", "control characters"),
        ("99-0001", "n" * 301, "name", "longer than 300"),
    ],
)
def test_a_bad_new_group_is_refused_naming_the_field(
    tiny_taxonomy, admin_user, code, name, field, message
):
    before = snapshot()
    with pytest.raises(TaxonomyEditError, match=message) as caught:
        group_create(taxonomy=tiny_taxonomy, code=code, name=name, user=admin_user)
    assert caught.value.field == field
    assert snapshot() == before


def test_renaming_a_group_records_the_old_and_new_name(tiny_taxonomy, admin_user):
    renamed = group_rename(
        group=group(BARISTAS), name="Baristas and Coffee Makers", user=admin_user
    )
    assert group(BARISTAS).name == renamed.name == "Baristas and Coffee Makers"
    (event,) = events("group.rename")
    assert event.before == {"code": BARISTAS, "name": "Baristas"}
    assert event.after == {"code": BARISTAS, "name": "Baristas and Coffee Makers"}
    assert event.actor == admin_user


def test_renaming_to_the_same_name_changes_and_records_nothing(tiny_taxonomy, admin_user):
    group_rename(group=group(BARISTAS), name="Baristas", user=admin_user)
    assert events("group.rename") == []


def test_an_empty_new_name_is_refused(tiny_taxonomy, admin_user):
    before = snapshot()
    with pytest.raises(TaxonomyEditError) as caught:
        group_rename(group=group(BARISTAS), name=" \t ", user=admin_user)
    assert caught.value.field == "name"
    assert snapshot() == before


# --- group_merge ----------------------------------------------------------------------------


def test_merging_moves_members_drops_duplicates_and_deletes_the_source(tiny_taxonomy, admin_user):
    member_add(group=group(NURSES), text="Coffee Maker", user=admin_user)
    source_id = group(BARISTAS).id
    merged = group_merge(source=group(BARISTAS), target=group(NURSES), user=admin_user)
    assert merged == group(NURSES)
    assert not Group.objects.filter(id=source_id).exists()
    nurses = texts_of(NURSES)
    assert nurses == sorted(
        [
            "Baristas",
            "Charge Nurse",
            "Coffee Maker",
            "Coffee Shop Server",
            "Espresso Bar Attendant",
            "ICU Nurse",
            "Registered Nurses",
            "Staff Nurse",
        ]
    )
    (event,) = events("group.merge")
    assert event.object_id == str(merged.id)
    assert event.before["source"] == {
        "id": source_id,
        "code": BARISTAS,
        "name": "Baristas",
        "members": 4,
    }
    assert event.before["target"]["members"] == 5
    assert event.after["target"]["members"] == 8
    assert (event.after["members_moved"], event.after["members_dropped"]) == (3, 1)
    assert event.after["dropped_texts"] == ["Coffee Maker"]
    served_at_once_without_a_run()
    assert served("Espresso Bar Attendant") == (NURSES, "Espresso Bar Attendant")
    assert taxonomy_needs_reindex(merged.taxonomy)


def test_merging_carries_review_items_predictions_verdicts_and_pairs_to_the_target(
    tiny_taxonomy, curator, admin_user
):
    open_item, judged_item = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Barista Trainee", "Java Barista"], source="api"
    )
    assert open_item.top_group.code == judged_item.top_group.code == BARISTAS
    judgement = judgement_create(review_item=judged_item, user=curator, verdict="confirm")
    source = group(BARISTAS)
    # A new model version had changed the open item's answer from Baristas (its card says so).
    ReviewItem.objects.filter(id=open_item.id).update(changed_from=source)

    target = group_merge(source=source, target=group(NURSES), user=admin_user)

    open_item.refresh_from_db()
    assert open_item.top_group == target
    assert open_item.changed_from == target
    prediction = Prediction.objects.get(id=open_item.prediction_id)
    assert prediction.top_group == target
    codes = [entry["code"] for entry in prediction.ranked_groups]
    assert BARISTAS not in codes
    assert codes.count(NURSES) == 1
    assert codes[0] == NURSES
    judgement.refresh_from_db()
    assert judgement.group == target
    assert set(FeedbackPair.objects.values_list("group", flat=True)) == {target.id}
    assert Member.objects.get(text="Java Barista").group == target


def test_a_reassignment_between_the_merged_groups_no_longer_rejects_its_own_group(
    tiny_taxonomy, curator, admin_user
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    # Predicted Baristas, reassigned to the developers: Baristas rejected.
    judgement = judgement_create(
        review_item=item, user=curator, verdict="reassign", group=group(DEVS)
    )
    assert judgement.rejected_group.code == BARISTAS

    target = group_merge(source=group(DEVS), target=group(BARISTAS), user=admin_user)

    judgement.refresh_from_db()
    assert (judgement.group, judgement.rejected_group) == (target, None)
    assert not FeedbackPair.objects.filter(label=False).exists()
    assert FeedbackPair.objects.filter(label=True, group=target).exists()


def test_merging_moves_relations_and_drops_self_and_duplicate_ones(tiny_taxonomy, admin_user):
    devs, nurses, baristas, drivers = (group(c) for c in (DEVS, NURSES, BARISTAS, DRIVERS))
    for a, b in [(baristas, nurses), (nurses, baristas), (baristas, drivers), (nurses, drivers)]:
        GroupRelation.objects.create(taxonomy=tiny_taxonomy, group=a, related=b)
    GroupRelation.objects.create(taxonomy=tiny_taxonomy, group=devs, related=baristas)

    group_merge(source=baristas, target=nurses, user=admin_user)

    assert sorted(GroupRelation.objects.values_list("group__code", "related__code")) == sorted(
        [(NURSES, DRIVERS), (DEVS, NURSES)]
    )
    (event,) = events("group.merge")
    assert (event.after["relations_moved"], event.after["relations_dropped"]) == (1, 3)


@pytest.mark.parametrize("case", ["itself", "foreign"])
def test_a_bad_merge_is_refused_and_changes_nothing(tiny_taxonomy, admin_user, case):
    taxonomy_import(slug="other", path=TINY_CSV, fmt="csv")
    target = group(BARISTAS) if case == "itself" else group(NURSES, "other")
    before = snapshot()
    with pytest.raises(TaxonomyEditError) as caught:
        group_merge(source=group(BARISTAS), target=target, user=admin_user)
    assert caught.value.field == "target"
    assert snapshot() == before


def test_merging_into_a_group_deleted_meanwhile_is_refused(tiny_taxonomy, admin_user):
    gone = group_create(taxonomy=tiny_taxonomy, code="99-0001", name="Gone", user=admin_user)
    Group.objects.filter(id=gone.id).delete()
    before = snapshot()
    with pytest.raises(TaxonomyEditError) as caught:
        group_merge(source=group(BARISTAS), target=gone, user=admin_user)
    assert caught.value.field == "target"
    assert snapshot() == before


@pytest.mark.parametrize("verdict", ["confirm", "false_match"])
def test_a_verdict_given_before_its_group_was_merged_can_still_be_undone(
    tiny_taxonomy, curator, admin_user, verdict
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    assert item.top_group.code == BARISTAS
    judgement = judgement_create(review_item=item, user=curator, verdict=verdict)

    target = group_merge(source=group(BARISTAS), target=group(NURSES), user=admin_user)
    undone = judgement_undo(judgement=judgement, user=curator)

    assert undone.status == "pending"
    # Its answer, read again from its prediction, names the group the source went into.
    assert undone.top_group == target
    codes = [entry["code"] for entry in Prediction.objects.get(id=item.prediction_id).ranked_groups]
    assert BARISTAS not in codes


def test_a_false_match_then_a_pick_of_the_merged_group_no_longer_rejects_it(
    tiny_taxonomy, curator, admin_user
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    rejected = judgement_create(review_item=item, user=curator, verdict="false_match")
    assert rejected.rejected_group.code == BARISTAS
    item.refresh_from_db()
    picked = judgement_create(review_item=item, user=curator, verdict="reassign", group=group(DEVS))

    target = group_merge(source=group(DEVS), target=group(BARISTAS), user=admin_user)

    picked.refresh_from_db()
    assert picked.group == target
    pairs = FeedbackPair.objects.filter(judgement__review_item=item)
    assert not pairs.filter(group=target, label=False).exists()
    assert pairs.filter(group=target, label=True).exists()
