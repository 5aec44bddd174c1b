"""The card's word marking, its nearest members and the words the search matches."""

from __future__ import annotations

from models_app.siamese.text_match import matched_parts, nearest, plain_words, similarity, words


def test_marked_parts_give_the_text_back_and_mark_the_inputs_words():
    parts = matched_parts("Registered Nurses, ICU <b>", words("icu staff NURSE"))
    assert "".join(piece for piece, _ in parts) == "Registered Nurses, ICU <b>"
    assert [piece for piece, marked in parts if marked] == ["Nurses", "ICU"]


def test_words_fold_case_accents_and_a_plural_s():
    assert words("Café Nurses, glass") == {"cafe", "nurse", "glass"}
    # As a word being typed is matched: "nurses" is the start of no "nursery".
    assert plain_words("Café Nurses, glass") == {"cafe", "nurses", "glass"}


def test_nearer_strings_are_more_similar():
    assert similarity("staff nurse", "Staff Nurse") == 1.0
    assert similarity("staff nurse", "Charge Nurse") > similarity("staff nurse", "Tax Accountant")
    assert similarity("", "anything") == 0.0


def test_nearest_keeps_the_closest_and_the_given_order_among_equals():
    candidates = ["Tax Preparer", "Senior Tax Accountant", "Payroll Clerk", "Payroll Clerk II"]
    assert nearest("senior tax accountant", candidates, 2) == [
        "Senior Tax Accountant",
        "Tax Preparer",
    ]
    assert nearest("", ["b", "a"], 2) == ["b", "a"]
