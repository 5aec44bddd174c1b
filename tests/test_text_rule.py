"""One text rule for every field a person types (annotations/text_rule.py): the same characters
refused and dropped in a one-line text (clean_text) and a text of several lines
(clean_multiline_text), in the API's schema, and through every way in: normalize, members,
group and taxonomy names, descriptions, flag comments, guidelines."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest

from annotations.importers import ImportFileError
from annotations.models import Group, ReviewFlag, Taxonomy
from annotations.services.flags import FlagError, review_flag_create
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import ImportRejected, taxonomy_import
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.groups import group_create
from annotations.services.taxonomy_edit.guidelines import taxonomy_guidelines_update
from annotations.services.taxonomy_edit.members import member_add
from annotations.text_rule import (
    DROPPED,
    REFUSED_RANGES,
    TextError,
    clean_multiline_text,
    clean_text,
    refusal,
)
from models_app.siamese.text import comparison_key
from siamweb.web.api_schema import UNSTATED_RANGES, any_text_pattern, text_pattern

# What the issue found accepted, and what each now is.
REFUSED = {
    "\u202b": "RLE",
    "\u202c": "PDF",
    "\u202e": "RLO",
    "\u2066": "LRI",
    "\u2067": "RLI",
    "\u2068": "FSI",
    "\u2069": "PDI",
    "\u2062": "invisible times",
    "\u3164": "Hangul filler",
    "\U000e0041": "tag A",
    "\U000e0001": "language tag",
}
DROPPED_HERE = {
    "\u200f": "RLM",
    "\u200e": "LRM",
    "\u061c": "ALM",
    "\u200c": "ZWNJ",
    "\u200d": "ZWJ",
    "\u00ad": "soft hyphen",
    "\u200b": "ZWSP",
    "\u034f": "CGJ",
    "\u17b4": "KHMER VOWEL INHERENT AQ",
    "\u17b5": "KHMER VOWEL INHERENT AA",
    "\ufe00": "VS1",
    "\ufe0f": "VS16",
    "\u180b": "MONGOLIAN FVS1",
    "\u180d": "MONGOLIAN FVS3",
}


def derived_refused_ranges() -> list[tuple[int, int]]:
    """The refused characters as the rule states them, read off the Unicode database."""
    ranges: list[tuple[int, int]] = []
    for point in range(sys.maxunicode + 1):
        char = chr(point)
        if char in "\t\n\r":
            continue
        category = unicodedata.category(char)
        refused = (
            category in ("Cc", "Cs")
            or (category == "Cf" and char not in DROPPED)
            or char in "\u115f\u1160\u3164\uffa0\u2800\ufffd"
        )
        if not refused:
            continue
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1] = (ranges[-1][0], point)
        else:
            ranges.append((point, point))
    return ranges


def test_the_listed_ranges_are_the_unicode_databases():
    assert list(REFUSED_RANGES) == derived_refused_ranges()


@pytest.mark.parametrize("char", list(REFUSED), ids=list(REFUSED.values()))
def test_direction_and_invisible_characters_are_refused_naming_them(char):
    for clean in (clean_text, clean_multiline_text):
        with pytest.raises(TextError, match=f"U\\+{ord(char):04X}"):
            clean(f"Nur{char}se", max_length=50)


@pytest.mark.parametrize("char", list(DROPPED_HERE), ids=list(DROPPED_HERE.values()))
def test_marks_joiners_and_soft_hyphens_between_latin_letters_are_dropped(char):
    assert clean_text(f"Nur{char}se", max_length=50) == "Nurse"
    assert clean_multiline_text(f"Nur{char}se\nok", max_length=50) == "Nurse\nok"
    assert comparison_key(f"Nur{char}se") == "nurse"


def test_joiners_stay_where_they_shape_a_script_or_an_emoji():
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # ZWNJ between Persian letters
    cook = "Chef \U0001f469\u200d\U0001f373"  # woman, ZWJ, cooking: one emoji
    rainbow_flag = "\U0001f3f3\ufe0f\u200d\U0001f308"
    for text in (persian, cook, rainbow_flag):
        assert clean_text(text, max_length=50) == text
    assert comparison_key(persian) == comparison_key(persian.replace("\u200c", ""))


def test_variation_selectors_stay_after_what_they_select_a_form_of():
    heart = "Nurse \u2764\ufe0f"  # the red heart drawn as an emoji
    mongolian = "\u1820\u180b\u1821"
    for text in (heart, mongolian):
        assert clean_text(text, max_length=50) == text
    # Look-alikes: the same title with invisible marks in it is the same title.
    lookalikes = ["probe welder", "probe\u034f welder", "probe\ufe0f welder", "pro\u180cbe welder"]
    assert {clean_text(t, max_length=50) for t in lookalikes} == {"probe welder"}
    assert {comparison_key(t) for t in lookalikes} == {"probe welder"}
    with pytest.raises(TextError, match="empty"):
        clean_text("\ufe0f\u034f", max_length=50)


def test_one_line_and_several_lines_refuse_the_same_characters():
    for first, last in REFUSED_RANGES:
        for point in {first, last}:
            char = chr(point)
            assert refusal(char), hex(point)
            for clean in (clean_text, clean_multiline_text):
                with pytest.raises(TextError):
                    clean(f"a{char}b", max_length=10)


def test_the_schemas_patterns_refuse_what_the_rule_refuses():
    one_line, any_text = re.compile(text_pattern()), re.compile(any_text_pattern())
    for first, last in REFUSED_RANGES:
        if (first, last) in UNSTATED_RANGES:
            continue  # named in the description instead; the API's refusal is tested on its own
        for point in {first, last}:
            text = f"a{chr(point)}b"
            assert not one_line.search(text) and not any_text.search(text), hex(point)
    for char in DROPPED_HERE:
        assert one_line.search(f"a{char}b") and any_text.search(f"a{char}b")


def test_several_lines_keep_their_line_breaks_and_tabs():
    assert clean_multiline_text(" one\r\ntwo\r\tthree \n", max_length=50) == "one\ntwo\n\tthree"
    assert clean_multiline_text("  ", max_length=5) == ""


# --- every way in ---------------------------------------------------------------------------


def test_inputs_refuse_an_embedding(tiny_taxonomy):
    with pytest.raises(TextError, match="bidirectional controls"):
        clean_text("\u202b\u05de\u05e4\u05ea\u05d7\u202c", max_length=200)


def test_a_text_whose_key_spells_out_past_what_a_row_stores_is_refused(tiny_taxonomy, admin_user):
    # "\ufdfa" is one character, 18 in the key texts are compared by.
    assert clean_text("\ufdfa" * 27, max_length=200) == "\ufdfa" * 27  # 486 spelled out
    with pytest.raises(TextError, match=r"500 characters once .* spelled out \(504\)"):
        clean_text("\ufdfa" * 28, max_length=200)
    with pytest.raises(TaxonomyEditError, match="spelled out"):
        member_add(group=Group.objects.get(code="35-3023"), text="\ufdfa" * 28, user=admin_user)


def test_group_names_refuse_a_hangul_filler_and_drop_a_mark(tiny_taxonomy, admin_user):
    with pytest.raises(TaxonomyEditError, match="U\\+3164"):
        group_create(taxonomy=tiny_taxonomy, code="99-1", name="\u3164", user=admin_user)
    group = group_create(taxonomy=tiny_taxonomy, code="99-2", name="Dro\u200fnes", user=admin_user)
    assert group.name == "Drones"


def test_taxonomy_names_follow_the_rule(tmp_path, db):
    path = tmp_path / "t.csv"
    path.write_text("group_code,group_name,text\nA,Alpha,alpha\n")
    with pytest.raises(ImportFileError, match="taxonomy name contains bidirectional"):
        taxonomy_import(slug="t", path=path, fmt="csv", name="Jobs \u202egnp")
    assert not Taxonomy.objects.exists()
    report = taxonomy_import(slug="t", path=path, fmt="csv", name="Jo\u00adbs")
    assert report.taxonomy.name == "Jobs"


def test_descriptions_refuse_tag_characters(tmp_path, db):
    path = tmp_path / "t.csv"
    path.write_text(
        "group_code,group_name,text,description\nA,Alpha,alpha,Fine\U000e0041\U000e0042\n",
        encoding="utf-8",
    )
    with pytest.raises(ImportRejected) as refused:
        taxonomy_import(slug="t", path=path, fmt="csv")
    assert [str(error) for error in refused.value.errors] == [
        "t.csv:2: description contains invisible characters (U+E0041 TAG LATIN CAPITAL LETTER A), "
        "which hide what a text says"
    ]


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200b\u202e"])
def test_flag_comments_refuse_overrides_and_isolates(curator, tiny_taxonomy, char):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Nurse"], source="api")
    with pytest.raises(FlagError, match="bidirectional controls"):
        review_flag_create(
            review_item=item, user=curator, kind="comment", comment=f"see {char}exe.png"
        )
    flag = review_flag_create(
        review_item=item, user=curator, kind="comment", comment="line one\n\tzero\u200bwidth"
    )
    assert flag.comment == "line one\n\tzerowidth"
    assert ReviewFlag.objects.count() == 1


def test_flag_comments_through_the_api_name_the_character(api_client, tiny_taxonomy):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Nurse"], source="api")
    response = api_client.post(
        f"/api/v1/review-items/{item.id}/flags",
        {"kind": "comment", "comment": "a\u2068b\u2069"},
        format="json",
    )
    assert response.status_code == 400
    assert "U+2068" in response.json()["comment"][0]
    assert not ReviewFlag.objects.exists()


def test_guidelines_keep_no_override(tiny_taxonomy, admin_user):
    with pytest.raises(TaxonomyEditError, match="U\\+202E"):
        taxonomy_guidelines_update(
            taxonomy=tiny_taxonomy, text="Pick the \u202eright group", user=admin_user
        )
    tiny_taxonomy.refresh_from_db()
    assert tiny_taxonomy.guidelines == ""
