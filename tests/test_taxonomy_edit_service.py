"""An admin's taxonomy edits: each changes exactly what it says, leaves an audit trail with the
values before and after, queues a reindex when members change, and refuses bad input whole."""

from __future__ import annotations

import pytest

from annotations.models import (
    AuditEvent,
    FeedbackPair,
    Group,
    GroupRelation,
    Judgement,
    Member,
    Prediction,
    ReviewItem,
    Taxonomy,
)
from annotations.normalization import normalize_texts
from annotations.services.review import inputs_submit, judgement_create, judgement_undo
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit import (
    TaxonomyEditError,
    group_create,
    group_merge,
    group_rename,
    member_add,
    member_move,
    member_remove,
)
from models_app.models import TrainingRun
from models_app.services import taxonomy_needs_reindex
from tests.conftest import TINY_CSV

DEVS, NURSES, BARISTAS, DRIVERS, ACCOUNTANTS = (
    "15-1252",
    "29-1141",
    "35-3023",
    "53-3032",
    "13-2011",
)


def group(code: str, slug: str = "jobs") -> Group:
    return Group.objects.get(taxonomy__slug=slug, code=code)


def member(text: str) -> Member:
    return Member.objects.get(taxonomy__slug="jobs", text=text)


def texts_of(code: str) -> list[str]:
    return sorted(group(code).members.values_list("text", flat=True))


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def reindex_queued() -> bool:
    return TrainingRun.objects.filter(
        kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.QUEUED
    ).exists()


def served(text: str) -> tuple[str, str]:
    """The top group's code and member string for ``text``, as normalize serves it now."""
    (result,) = normalize_texts(Taxonomy.objects.get(slug="jobs"), [text], k=1)
    return result.groups[0].code, result.groups[0].member


def served_at_once_without_a_run() -> None:
    """An edit queues no run: it serves at once (group and members read at query time, new
    members from the live engine's delta) and the scheduled check reindexes what changed."""
    assert not reindex_queued()


def snapshot() -> tuple:
    """Everything an edit may touch, to show a refused edit touched nothing."""
    return (
        sorted(Group.objects.values_list("id", "code", "name")),
        sorted(Member.objects.values_list("id", "group_id", "text", "source", "judgement_id")),
        sorted(FeedbackPair.objects.values_list("id", "group_id", "text_a", "text_b", "label")),
        sorted(Judgement.objects.values_list("id", "group_id", "rejected_group_id")),
        sorted(ReviewItem.objects.values_list("id", "top_group_id")),
        sorted(GroupRelation.objects.values_list("group_id", "related_id")),
        AuditEvent.objects.exclude(action="taxonomy.import").count(),
        TrainingRun.objects.filter(kind=TrainingRun.Kind.REINDEX).count(),
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


@pytest.fixture
def confirmed(tiny_taxonomy, curator):
    """ "Java Barista" put among the software developers by a curator's verdict."""
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement = judgement_create(
        review_item=item, user=curator, verdict="reassign", group=group(DEVS)
    )
    return judgement


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
    assert served("Coffee Shop Server") == (DRIVERS, "Coffee Shop Server")
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
    # The verdict's hard negative said "not a barista"; the admin's says "not a developer".
    negatives = set(
        FeedbackPair.objects.filter(text_a="Java Barista", label=False).values_list(
            "group__code", flat=True
        )
    )
    assert negatives == {BARISTAS, DEVS}


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


def member_in(text: str, code: str) -> Member:
    return Member.objects.get(group=group(code), text=text)


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

    target = group_merge(source=source, target=group(NURSES), user=admin_user)

    open_item.refresh_from_db()
    assert open_item.top_group == target
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


# --- imports --------------------------------------------------------------------------------


def test_an_import_is_one_audit_event_with_the_reports_counts(db, admin_user):
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", user=admin_user)
    (event,) = events("taxonomy.import")
    assert (event.actor, event.taxonomy, event.object_type) == (
        admin_user,
        report.taxonomy,
        "taxonomy",
    )
    assert event.after["file"] == "tiny_taxonomy.csv"
    assert (event.after["rows_read"], event.after["groups_created"]) == (21, 5)
    assert (event.after["members_created"], event.after["unchanged"]) == (21, False)
