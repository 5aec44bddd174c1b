"""On a phone (375 x 667, an iPhone SE): the page fits the screen's width, the menu scrolls
sideways on one row, and the review card starts on the first screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.services.review.inputs import inputs_submit
from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser


def test_the_review_card_fits_a_phone_and_starts_on_its_first_screen(
    page, live_server, admin_user, tiny_taxonomy
):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    page.set_viewport_size({"width": 375, "height": 667})
    log_in(page, live_server, "ada", "ada-pass-123")  # an admin: the longest menu
    card = page.get_by_test_id("review-card")
    expect(card).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    nav = page.locator(".topbar nav").bounding_box()
    assert nav["x"] >= 0 and nav["x"] + nav["width"] <= 375
    assert card.bounding_box()["y"] < 667 / 2
    # The menu's last entry is reached by scrolling the menu, not the page.
    last = page.locator(".topbar nav a").last
    last.scroll_into_view_if_needed()
    expect(last).to_be_in_viewport()
    assert page.evaluate("window.scrollX") == 0
