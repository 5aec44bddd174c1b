"""An id is a JSON integer or ASCII digits alone (siamweb.ids): a full-width one ("\uff11")
once recorded a verdict on item 1, and " 9 " and 9.0 were read as 9. Each is refused, naming the
field, and nothing is stored."""

from __future__ import annotations

import pytest
from django import forms

from annotations.forms.review import BatchVerdictForm, JudgementForm
from annotations.models import Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit
from siamweb.ids import MAX_ID, IdError, IdFormField, parse_id

FULL_WIDTH = "\uff11"  # a full-width one
ARABIC_INDIC = "\u0661"  # an Arabic-Indic one: int() reads it as 1 too

NOT_IDS = [FULL_WIDTH, ARABIC_INDIC, " 9 ", "9 ", "9.0", 9.0, "+9", "9_000", "0x9", "", True]


@pytest.fixture
def item(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    return item


@pytest.mark.parametrize("value", NOT_IDS)
def test_parse_id_refuses_what_int_would_stretch_to_a_number(value):
    with pytest.raises(IdError, match="ASCII digits"):
        parse_id(value)


def test_parse_id_takes_integers_and_ascii_digits_within_a_bigint():
    assert [parse_id(9), parse_id("9"), parse_id("0009"), parse_id(str(MAX_ID))] == [
        9,
        9,
        9,
        MAX_ID,
    ]
    with pytest.raises(IdError, match="between 0 and"):
        parse_id(MAX_ID + 1)


@pytest.mark.parametrize("value", [FULL_WIDTH, " 1 ", 1.0, "1.0"])
def test_the_api_refuses_a_review_item_id_not_in_ascii_digits(api_client, item, value):
    ReviewItem.objects.filter(id=item.id).update(id=1)
    response = api_client.post(
        "/api/v1/judgements", {"review_item": value, "verdict": "confirm"}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()) == ["review_item"]
    assert response.json()["review_item"][0].startswith("A valid integer is required")
    assert not Judgement.objects.exists()


def test_the_api_refuses_a_filter_id_not_in_ascii_digits(api_client, item):
    response = api_client.get("/api/v1/judgements", {"review_item": FULL_WIDTH})
    assert response.status_code == 400
    assert list(response.json()) == ["review_item"]


@pytest.mark.parametrize("value", [FULL_WIDTH, " 9 ", "9.0"])
def test_the_review_forms_refuse_ids_not_in_ascii_digits(item, value):
    batch = BatchVerdictForm(data={"item": [value]})
    assert not batch.is_valid()
    assert batch.errors["item"] == ["expected review item ids"]
    verdict = JudgementForm(data={"verdict": "confirm", "prediction_id": value}, review_item=item)
    assert not verdict.is_valid()
    assert "prediction_id" in verdict.errors


def test_a_form_id_field_takes_ascii_digits():
    field = IdFormField(min_value=1)
    assert field.clean("42") == 42
    # A page's form or query string holds text: its refusal speaks of digits, not of JSON.
    with pytest.raises(forms.ValidationError) as refused:
        field.clean(FULL_WIDTH)
    assert refused.value.messages == ["Enter a whole number. an id is ASCII digits (0-9) alone"]
