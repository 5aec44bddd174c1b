"""In Chromium: a ranker refit while a curator works shows on the very next card, which ranks
its text as the API does at that moment."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.services.review.inputs import inputs_submit
from models_app.models import RankerVersion
from models_app.serving.normalize import rank_taxonomy_groups
from tests.browser.test_review_in_browser import log_in
from tests.browser.test_review_keyboard import shown_item
from tests.test_match_probability import judge_all

pytestmark = pytest.mark.browser

TEXTS = ["Senior Tax Accountant Remote", "Overnight ICU Charge Nurse"]


def test_the_next_card_after_a_refit_shows_the_apis_answer(
    page, live_server, curator, tiny_taxonomy
):
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    stored = {item.id: item.prediction.ranked_groups for item in items}
    log_in(page, live_server, "carla", "carla-pass-123")
    first = shown_item(page)

    judge_all(tiny_taxonomy, curator)  # meanwhile: verdicts, and a ranker fitted on them
    assert RankerVersion.objects.filter(status="live").exists()
    page.keyboard.press(" ")  # skip: the next card
    expect(page.get_by_test_id("review-card")).not_to_have_attribute("data-item-id", str(first.id))
    card = shown_item(page)
    assert card.id in stored
    (live,) = rank_taxonomy_groups(tiny_taxonomy, [card.input.text], k=5)
    wanted = [f"{group.probability:.2f}" for group in live.groups]
    assert wanted != [f"{group['probability']:.2f}" for group in stored[card.id]]
    expect(page.get_by_test_id("option-probability")).to_have_text(wanted)
