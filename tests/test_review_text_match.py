"""The card's word marking, its nearest members and the type-ahead's ranking."""

from __future__ import annotations

from annotations.models import Group
from annotations.selectors import group_search
from annotations.text_match import matched_parts, name_relevance, nearest, similarity, words


def test_marked_parts_give_the_text_back_and_mark_the_inputs_words():
    parts = matched_parts("Registered Nurses, ICU <b>", words("icu staff NURSE"))
    assert "".join(piece for piece, _ in parts) == "Registered Nurses, ICU <b>"
    assert [piece for piece, marked in parts if marked] == ["Nurses", "ICU"]


def test_words_fold_case_accents_and_a_plural_s():
    assert words("Café Nurses, glass") == {"cafe", "nurse", "glass"}


def test_nearer_strings_are_more_similar():
    assert similarity("staff nurse", "Staff Nurse") == 1.0
    assert similarity("staff nurse", "Charge Nurse") > similarity("staff nurse", "Tax Accountant")
    assert similarity("", "anything") == 0.0


def test_relevance_orders_exact_whole_word_mid_word_then_substring():
    ranks = {
        name: name_relevance(name, "00-0000", "nurse")
        for name in ["Nurse", "Nurse Midwives", "Registered Nurses", "Nursery Workers"]
    }
    # A whole word first or last is one tier: the model's score for the input orders them.
    assert ranks == {
        "Nurse": 0,
        "Nurse Midwives": 1,
        "Registered Nurses": 1,
        "Nursery Workers": 2,
    }
    assert name_relevance("Agronurse Aides", "00-0000", "nurse") == 3
    assert name_relevance("Anything", "29-1141", "29-1141") == 0
    assert name_relevance("Anything", "29-1141", "29-11") == 1


def test_group_search_leaves_out_excluded_groups_and_breaks_ties_by_score(tiny_taxonomy):
    acute = Group.objects.create(
        taxonomy=tiny_taxonomy, code="29-1141.01", name="Acute Care Nurses"
    )
    registered = tiny_taxonomy.groups.get(code="29-1141")
    found = group_search(taxonomy=tiny_taxonomy, query="nurses")
    assert found == [acute, registered]  # no scores: the same length, then by name
    scored = group_search(taxonomy=tiny_taxonomy, query="nurses", scores={registered.id: 0.4})
    assert scored == [registered, acute]
    assert group_search(taxonomy=tiny_taxonomy, query="nurses", exclude={registered.id}) == [acute]


def test_nearest_keeps_the_closest_and_the_given_order_among_equals():
    candidates = ["Tax Preparer", "Senior Tax Accountant", "Payroll Clerk", "Payroll Clerk II"]
    assert nearest("senior tax accountant", candidates, 2) == [
        "Senior Tax Accountant",
        "Tax Preparer",
    ]
    assert nearest("", ["b", "a"], 2) == ["b", "a"]
