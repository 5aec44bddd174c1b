"""Member edits: a text added (served at once), moved (its training pairs following) or removed;
each audited, bad input refused whole."""

from __future__ import annotations

import pytest

from annotations.models import FeedbackPair, Group, Member
from annotations.services.review.undo import judgement_undo
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.groups import group_create
from annotations.services.taxonomy_edit.members import member_add, member_move, member_remove
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.training.services.indexes import taxonomy_needs_reindex
from tests.conftest import TINY_CSV
from tests.taxonomy_edit.conftest import (
    BARISTAS,
    DEVS,
    DRIVERS,
    NURSES,
    events,
    group,
    member,
    member_in,
    served,
    served_at_once_without_a_run,
    snapshot,
    texts_of,
)

# --- member_add -----------------------------------------------------------------------------


def test_adding_a_member_stores_a_cleaned_admin_member_and_serves_it_at_once(
    tiny_taxonomy, admin_user
):
    added = member_add(group=group(BARISTAS), text="  Latte   Artist ", user=admin_user)
    assert (added.text, added.normalized_text, added.source, added.added_by) == (
        "Latte Artist",
        "latte artist",
        Member.Source.ADMIN,
        admin_user,
    )
    assert "Latte Artist" in texts_of(BARISTAS)
    assert added.also_in == []
    (event,) = events("member.add")
    assert event.object_type == "member"
    assert event.after == {
        "text": "Latte Artist",
        "group": BARISTAS,
        "group_id": group(BARISTAS).id,
        "source": "admin",
    }
    served_at_once_without_a_run()
    assert served("latte artist") == (BARISTAS, "Latte Artist")
    assert taxonomy_needs_reindex(added.taxonomy)


def test_a_text_already_in_the_group_is_refused_in_any_spelling(tiny_taxonomy, admin_user):
    before = snapshot()
    with pytest.raises(TaxonomyEditError, match="already in 35-3023") as caught:
        member_add(group=group(BARISTAS), text="coffee  MAKER", user=admin_user)
    assert caught.value.field == "text"
    assert snapshot() == before


def test_a_text_of_another_group_may_join_and_the_other_group_is_named(tiny_taxonomy, admin_user):
    added = member_add(group=group(BARISTAS), text="Staff Nurse", user=admin_user)
    assert [g.code for g in added.also_in] == [NURSES]
    assert "Staff Nurse" in texts_of(NURSES)
    assert "Staff Nurse" in texts_of(BARISTAS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "text is empty"),
        ("   ", "text is empty"),
        ("Bad\x07Bell", "control characters"),
        ("x" * 201, "longer than 200"),
        (None, "must be a string"),
    ],
)
def test_bad_member_text_is_refused_naming_text(tiny_taxonomy, admin_user, text, message):
    before = snapshot()
    with pytest.raises(TaxonomyEditError, match=message) as caught:
        member_add(group=group(BARISTAS), text=text, user=admin_user)
    assert caught.value.field == "text"
    assert snapshot() == before


def test_adding_to_a_deleted_group_is_refused(tiny_taxonomy, admin_user):
    gone = group_create(taxonomy=tiny_taxonomy, code="99-0001", name="Gone", user=admin_user)
    Group.objects.filter(id=gone.id).delete()
    with pytest.raises(TaxonomyEditError) as caught:
        member_add(group=gone, text="Ghost", user=admin_user)
    assert caught.value.field == "group"
    assert not Member.objects.filter(text="Ghost").exists()


# --- member_move ----------------------------------------------------------------------------


def test_moving_a_member_changes_its_group_and_says_so_in_the_audit(tiny_taxonomy, admin_user):
    moved = member_move(member=member("Coffee Shop Server"), group=group(DRIVERS), user=admin_user)
    assert moved.group_id == group(DRIVERS).id
    assert "Coffee Shop Server" in texts_of(DRIVERS)
    assert "Coffee Shop Server" not in texts_of(BARISTAS)
    (event,) = events("member.move")
    assert event.before["group"] == BARISTAS
    assert event.after["group"] == DRIVERS
    assert event.object_id == str(moved.id)
    served_at_once_without_a_run()
    # Served at once from its new group; which group comes first is the ranker's to weigh (a
    # lone title in Heavy Truck Drivers against Baristas' coffee titles and description).
    (answer,) = rank_taxonomy_groups(tiny_taxonomy, ["Coffee Shop Server"], k=5)
    by_code = {group.code: group.member for group in answer.groups}
    assert by_code[DRIVERS] == "Coffee Shop Server"
    assert by_code.get(BARISTAS) != "Coffee Shop Server"
    assert not taxonomy_needs_reindex(moved.taxonomy)  # the index holds the member as it was


def test_a_move_stores_a_positive_pair_for_the_new_group_and_a_hard_negative_for_the_old(
    tiny_taxonomy, admin_user
):
    member_move(member=member("Coffee Shop Server"), group=group(DRIVERS), user=admin_user)
    pairs = set(
        FeedbackPair.objects.values_list("text_a", "text_b", "group__code", "label", "origin")
    )
    assert pairs == {
        ("Coffee Shop Server", "Heavy Truck Drivers", DRIVERS, True, "reassign"),
        ("Coffee Shop Server", "Baristas", BARISTAS, False, "reassign_negative"),
    }
    assert not FeedbackPair.objects.filter(judgement__isnull=False).exists()


def test_a_move_rewrites_the_pairs_that_put_the_text_in_the_old_group(
    confirmed, admin_user, curator
):
    member_move(member=member("Java Barista"), group=group(BARISTAS), user=admin_user)
    positives = list(
        FeedbackPair.objects.filter(text_a="Java Barista", label=True).values_list(
            "text_b", "group__code", "judgement"
        )
    )
    assert positives == [("Baristas", BARISTAS, None)]
    # The verdict's hard negative said "not a barista": the move says it is one, and that pair
    # goes; the admin's says "not a developer".
    negatives = set(
        FeedbackPair.objects.filter(text_a="Java Barista", label=False).values_list(
            "group__code", flat=True
        )
    )
    assert negatives == {DEVS}


def test_undoing_the_verdict_after_a_move_leaves_the_admins_placement(
    confirmed, admin_user, curator
):
    member_move(member=member("Java Barista"), group=group(BARISTAS), user=admin_user)
    judgement_undo(judgement=confirmed, user=curator)
    assert member("Java Barista").group.code == BARISTAS
    assert FeedbackPair.objects.filter(
        text_a="Java Barista", label=True, group__code=BARISTAS
    ).exists()


@pytest.mark.parametrize(
    ("target", "field", "message"),
    [
        (BARISTAS, "group", "already in 35-3023"),
        ("other:" + DEVS, "group", "another taxonomy"),
    ],
)
def test_a_bad_move_is_refused_naming_the_field(tiny_taxonomy, admin_user, target, field, message):
    taxonomy_import(slug="other", path=TINY_CSV, fmt="csv")
    slug, _, code = target.rpartition(":")
    before = snapshot()
    with pytest.raises(TaxonomyEditError, match=message) as caught:
        member_move(
            member=member("Coffee Maker"), group=group(code, slug or "jobs"), user=admin_user
        )
    assert caught.value.field == field
    assert snapshot() == before


def test_moving_into_a_group_that_has_the_text_already_is_refused(tiny_taxonomy, admin_user):
    member_add(group=group(DRIVERS), text="Coffee Maker", user=admin_user)
    before = snapshot()
    with pytest.raises(TaxonomyEditError, match="already in 53-3032") as caught:
        member_move(member=member_in("Coffee Maker", BARISTAS), group=group(DRIVERS), user=None)
    assert caught.value.field == "group"
    assert snapshot() == before


def test_moving_a_member_removed_meanwhile_is_refused(tiny_taxonomy, admin_user):
    stale = member("Coffee Maker")
    Member.objects.filter(id=stale.id).delete()
    with pytest.raises(TaxonomyEditError) as caught:
        member_move(member=stale, group=group(DRIVERS), user=admin_user)
    assert caught.value.field == "member"


# --- member_remove --------------------------------------------------------------------------


def test_removing_a_member_deletes_it_and_its_positive_pairs_and_audits_it(confirmed, admin_user):
    removed = member("Java Barista")
    member_remove(member=removed, user=admin_user)
    assert not Member.objects.filter(id=removed.id).exists()
    assert not FeedbackPair.objects.filter(text_a="Java Barista", label=True).exists()
    # "not a barista" is still true.
    assert FeedbackPair.objects.filter(
        text_a="Java Barista", label=False, group__code=BARISTAS
    ).exists()
    (event,) = events("member.remove")
    assert event.before == {
        "text": "Java Barista",
        "group": DEVS,
        "group_id": group(DEVS).id,
        "source": "curator",
    }
    assert event.after == {"feedback_pairs_removed": 1}
    assert event.object_id == str(removed.id)
    served_at_once_without_a_run()
    assert served("Java Barista")[1] != "Java Barista"
    # The verdict's member was served from the delta and never indexed: nothing to rebuild.
    assert not taxonomy_needs_reindex(removed.taxonomy)


def test_removing_leaves_pairs_for_the_same_text_in_other_groups(tiny_taxonomy, admin_user):
    member_move(member=member("Coffee Shop Server"), group=group(DRIVERS), user=admin_user)
    member_add(group=group(BARISTAS), text="Coffee Shop Server", user=admin_user)
    member_remove(member=member_in("Coffee Shop Server", BARISTAS), user=admin_user)
    assert FeedbackPair.objects.filter(
        text_a="Coffee Shop Server", label=True, group__code=DRIVERS
    ).exists()


def test_removing_twice_is_refused(tiny_taxonomy, admin_user):
    removed = member("Coffee Maker")
    member_remove(member=removed, user=admin_user)
    with pytest.raises(TaxonomyEditError) as caught:
        member_remove(member=removed, user=admin_user)
    assert caught.value.field == "member"
    assert len(events("member.remove")) == 1
