"""Back then Forward to the review card: the card the curator holds now, never the one they had
already judged (the browser kept the page, and a key pressed on it acted on that old card)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Judgement
from annotations.services.review.inputs import inputs_submit
from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser


def test_forward_to_the_card_shows_the_next_card_and_todays_count(
    page, live_server, curator, tiny_taxonomy
):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Senior Java Engineer", "Java Barista"], source="demo"
    )
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/queue/")
    page.goto(f"{live_server.url}/review/")
    page.wait_for_load_state("load")
    card = page.get_by_test_id("review-card")
    judged = card.get_attribute("data-item-id")
    page.keyboard.press("a")
    expect(page.get_by_test_id("progress")).to_contain_text("· 1 yours today")
    expect(card).not_to_have_attribute("data-item-id", judged)
    following = card.get_attribute("data-item-id")

    page.go_back()
    expect(page).to_have_url(f"{live_server.url}/review/queue/")
    page.go_forward()
    expect(page).to_have_url(f"{live_server.url}/review/")
    expect(card).to_have_attribute("data-item-id", following)
    expect(page.get_by_test_id("progress")).to_contain_text("· 1 yours today")
    assert [str(j.review_item_id) for j in Judgement.objects.all()] == [judged]
