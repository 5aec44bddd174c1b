from __future__ import annotations

import re

import pytest

from annotations.text_rule import TextError, clean_text
from models_app.siamese.text import comparison_key


def test_it_collapses_whitespace_and_keeps_case():
    assert clean_text("  Senior\t Java \n Developer ", max_length=50) == "Senior Java Developer"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "is empty"),
        ("   \t\n ", "is empty"),
        ("java\x00developer", "control characters"),
        ("bell\x07", "control characters"),
        ("x" * 51, "longer than 50 characters (51)"),
        (42, "must be a string"),
        (None, "must be a string"),
        ("admin\u202egnp.exe", "bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE)"),
        ("\u2066Nurse\u2069", "bidirectional controls (U+2066 LEFT-TO-RIGHT ISOLATE)"),
        ("Caf\ufffd", "U+FFFD, the mark of bytes that were not valid UTF-8"),
        ("\u200b\ufeff", "is empty"),
    ],
)
def test_it_refuses_bad_text_with_a_reason(raw, message):
    with pytest.raises(TextError, match=re.escape(message)):
        clean_text(raw, max_length=50)


def test_invisible_zero_width_characters_are_dropped_and_compare_as_absent():
    # A real ESCO label holds a zero-width space; nobody typing the label would.
    assert clean_text("data\u200b scientist\ufeff", max_length=50) == "data scientist"
    assert clean_text("Nur\u2060se", max_length=50) == "Nurse"
    assert comparison_key("Nur\u200bse") == comparison_key("nurse")


def test_normalize_text_folds_case_width_and_spacing():
    assert (
        comparison_key("  \uff2a\uff21\uff36\uff21   Developer ") == "java developer"
    )  # full-width
    assert comparison_key("Straße") == comparison_key("STRASSE")
