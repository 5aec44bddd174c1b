from __future__ import annotations

import pytest

from models_app.siamese.text import TextError, clean_text, comparison_key


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
    ],
)
def test_it_refuses_bad_text_with_a_reason(raw, message):
    with pytest.raises(TextError, match=message.replace("(", r"\(").replace(")", r"\)")):
        clean_text(raw, max_length=50)


def test_normalize_text_folds_case_width_and_spacing():
    assert (
        comparison_key("  \uff2a\uff21\uff36\uff21   Developer ") == "java developer"
    )  # full-width
    assert comparison_key("Straße") == comparison_key("STRASSE")
