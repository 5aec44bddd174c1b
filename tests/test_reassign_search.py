"""The reassign search finds the group a curator means: by code, by the start of a name's or a
title's words (an abbreviation is a word of titles), and by meaning (the live encoder's nearest
groups), never by a piece inside a word; groups rejected for the input are never offered."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.models import Group
from annotations.selectors.search import reassign_group_search
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy_edit.members import member_add
from models_app.serving.group_search import taxonomy_groups_for_query


def found(taxonomy, query: str, **options) -> list[tuple[str, str]]:
    return [
        (hit.group.name, hit.why)
        for hit in reassign_group_search(taxonomy=taxonomy, query=query, **options)
    ]


def group(taxonomy, code: str) -> Group:
    return Group.objects.get(taxonomy=taxonomy, code=code)


def test_an_abbreviation_finds_the_group_whose_titles_have_it_not_names_that_contain_it(
    tiny_taxonomy, admin_user
):
    """ "RN" is a word of a title of Registered Nurses; "Furniture Finishers" only holds "rn"
    inside a word, and is not found by it."""
    furniture = Group.objects.create(
        taxonomy=tiny_taxonomy, code="51-7021", name="Furniture Finishers"
    )
    member_add(group=furniture, text="Wood Finisher", user=admin_user)
    member_add(group=group(tiny_taxonomy, "29-1141"), text="ER RN", user=admin_user)
    member_add(group=group(tiny_taxonomy, "29-1141"), text="Dialysis RN", user=admin_user)

    results = found(tiny_taxonomy, "RN")

    assert results[0] == ("Registered Nurses", "ER RN")
    assert ("Furniture Finishers", "name") not in results


def test_a_title_that_is_the_query_comes_before_titles_that_hold_its_words(
    tiny_taxonomy, admin_user
):
    instructors = Group.objects.create(
        taxonomy=tiny_taxonomy, code="25-1194", name="Driving Instructors"
    )
    for text in ("Lorry Driver Instructor", "Lorry Driver Training Instructor"):
        member_add(group=instructors, text=text, user=admin_user)
    member_add(group=group(tiny_taxonomy, "53-3032"), text="Lorry Driver", user=admin_user)
    assert found(tiny_taxonomy, "lorry driver")[:2] == [
        ("Heavy Truck Drivers", "Lorry Driver"),
        ("Driving Instructors", "Lorry Driver Instructor"),
    ]


def test_a_code_finds_its_group_first_and_the_start_of_a_code_its_groups(tiny_taxonomy):
    Group.objects.create(taxonomy=tiny_taxonomy, code="29-1141.01", name="Acute Care Nurses")
    assert found(tiny_taxonomy, "29-1141")[0] == ("Registered Nurses", "name")
    assert [name for name, _ in found(tiny_taxonomy, "29-11")][:2] == [
        "Registered Nurses",
        "Acute Care Nurses",
    ]


def test_a_word_being_typed_finds_names_by_the_start_of_their_words(tiny_taxonomy):
    nursery = Group.objects.create(taxonomy=tiny_taxonomy, code="39-9011", name="Nursery Workers")
    assert found(tiny_taxonomy, "truck driv")[0][0] == "Heavy Truck Drivers"
    nurse = [name for name, _ in found(tiny_taxonomy, "nurse")]
    # The whole word first; a name where it only starts a longer word after.
    assert nurse.index("Registered Nurses") < nurse.index(nursery.name)
    # "nurses" is a whole word, plural or not, and the start of no other word.
    assert nursery.name not in [name for name, _ in found(tiny_taxonomy, "nurses")]
    # "ist" is inside "Barista", at the start of no word of a name or title.
    assert ("Baristas", "name") not in found(tiny_taxonomy, "ist")


def test_among_equal_matches_the_group_with_more_titles_holding_the_words_comes_first(
    tiny_taxonomy,
):
    acute = Group.objects.create(taxonomy=tiny_taxonomy, code="29-1141.01", name="Acute Nurses")
    registered = group(tiny_taxonomy, "29-1141")
    # Both names hold "nurses" whole; Registered Nurses has four titles with it, Acute none.
    assert [name for name, _ in found(tiny_taxonomy, "nurses")][:2] == [
        "Registered Nurses",
        "Acute Nurses",
    ]
    # Equal in every other way (no titles), the model's score for the input decides.
    registered.delete()
    other = Group.objects.create(taxonomy=tiny_taxonomy, code="29-1141.02", name="Night Nurses")
    assert [name for name, _ in found(tiny_taxonomy, "nurses")] == ["Acute Nurses", "Night Nurses"]
    assert [name for name, _ in found(tiny_taxonomy, "nurses", scores={other.id: 0.4})] == [
        "Night Nurses",
        "Acute Nurses",
    ]
    assert found(tiny_taxonomy, "nurses", exclude={other.id}) == [("Acute Nurses", "name")]
    assert acute.id not in [m.group_id for m in taxonomy_groups_for_query(
        tiny_taxonomy, "nurses", exclude={acute.id}
    )]  # fmt: skip


def test_a_misspelling_is_answered_by_meaning_before_any_ranker_is_fitted(tiny_taxonomy):
    """No name or title holds "acountant": the encoder's nearest group for it is offered,
    marked as similar, with no verdict given yet."""
    assert found(tiny_taxonomy, "acountant")[0] == ("Accountants", "similar")


# Committed, as in production: what a process keeps behind the taxonomy's revision is used.
@pytest.mark.django_db(transaction=True)
def test_a_title_added_by_a_verdict_after_the_build_is_found_at_once(tiny_taxonomy, curator):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Kaffeekoch"], source="api")
    assert ("Baristas", "Kaffeekoch") not in found(tiny_taxonomy, "kaffee")
    baristas = group(tiny_taxonomy, "35-3023")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=baristas)
    assert found(tiny_taxonomy, "kaffee")[0] == ("Baristas", "Kaffeekoch")


@pytest.mark.django_db(transaction=True)
def test_a_renamed_group_is_found_by_its_new_name(tiny_taxonomy):
    assert found(tiny_taxonomy, "barista")[0] == ("Baristas", "name")
    Group.objects.filter(taxonomy=tiny_taxonomy, code="35-3023").update(name="Coffee Brewers")
    assert found(tiny_taxonomy, "brewer")[0] == ("Coffee Brewers", "name")


@pytest.mark.django_db(transaction=True)
def test_at_an_unchanged_revision_a_search_reads_no_member_but_a_title_equal_to_it(
    tiny_taxonomy,
):
    taxonomy_groups_for_query(tiny_taxonomy, "nurse")
    with CaptureQueriesContext(connection) as queries:
        taxonomy_groups_for_query(tiny_taxonomy, "truck")
    # The live pointer with the revision, and a title that is the query (by its index).
    sql = [query["sql"] for query in queries]
    assert len(sql) == 2 and "normalized_text = 'truck'" in sql[1], sql


@pytest.mark.parametrize("query", ["", "   ", "\x00", "a" * 300])
def test_a_query_that_is_no_text_finds_nothing_and_fails_nothing(tiny_taxonomy, query):
    assert found(tiny_taxonomy, query) == []
