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


LONG_DESCRIPTION = (
    "Research, design, and develop computer and network software or specialized utility "
    "programs. Analyze user needs and develop software solutions, applying principles and "
    "techniques of computer science, engineering, and mathematical analysis. Update software "
    "or enhance existing software capabilities."
)


def test_on_a_phone_the_card_and_its_first_option_come_first_and_the_filters_fold_away(
    page, live_server, admin_user, tiny_taxonomy
):
    # A card as O*NET's are: long descriptions, members beside them, guidelines to read.
    tiny_taxonomy.groups.update(description=LONG_DESCRIPTION)
    tiny_taxonomy.guidelines = "# Guidelines\n\nPick the group the *job* belongs to."
    tiny_taxonomy.save(update_fields=["guidelines"])
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer (m/f/d)"], source="api")
    page.set_viewport_size({"width": 375, "height": 667})
    log_in(page, live_server, "ada", "ada-pass-123")

    card = page.get_by_test_id("review-card")
    expect(card).to_be_visible()
    first = page.get_by_test_id("group-option").first
    assert first.bounding_box()["y"] + first.bounding_box()["height"] <= 667
    expect(first).to_be_in_viewport(ratio=1)
    # The filters are folded under one line, and open whole: none cut off at the side.
    filters = page.get_by_test_id("filters")
    expect(filters).to_be_hidden()
    page.get_by_test_id("filters-toggle").click()
    expect(filters).to_be_visible()
    assert filters.evaluate("form => form.scrollWidth <= form.clientWidth")
    for field in filters.locator("select, input:not([type=checkbox])").all():
        box = field.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 375
    assert page.evaluate("document.documentElement.scrollWidth") <= 375


def test_on_a_wide_screen_the_filters_stay_open(page, live_server, curator, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, live_server, "carla", "carla-pass-123")
    expect(page.get_by_test_id("filters")).to_be_visible()
    expect(page.get_by_test_id("filters-toggle")).to_be_hidden()


def test_on_a_phone_what_scrolls_sideways_shows_a_shadow_where_more_is_hidden(
    page, live_server, admin_user, tiny_taxonomy
):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    page.set_viewport_size({"width": 375, "height": 667})
    log_in(page, live_server, "ada", "ada-pass-123")
    page.goto(f"{live_server.url}/review/queue/")
    for selector in (".topbar nav", "[data-testid=queue-table]"):
        box = page.locator(selector)
        # It overflows the phone's width and scrolls on its own, the page does not...
        assert box.evaluate("el => el.scrollWidth > el.clientWidth")
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        # ...and says so: shadows at its edges, uncovered where content is hidden.
        style = box.evaluate("el => getComputedStyle(el).backgroundImage")
        assert style.count("radial-gradient") == 2, style
        assert box.evaluate("el => getComputedStyle(el).backgroundAttachment") == (
            "local, local, scroll, scroll"
        )


def test_on_a_phone_the_batch_grid_and_the_models_page_keep_the_screens_width(
    page, live_server, admin_user, tiny_taxonomy
):
    texts = [f"Python Developer {n}" for n in range(6)]
    inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")
    page.set_viewport_size({"width": 375, "height": 667})
    log_in(page, live_server, "ada", "ada-pass-123")
    for url in ("/review/batch/jobs/15-1252/", "/models/"):
        page.goto(f"{live_server.url}{url}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, url
