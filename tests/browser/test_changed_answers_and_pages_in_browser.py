"""What a curator sees after a promotion changed answers nobody judged, and on a wrong address."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.services.review.inputs import review_items_repredict
from tests.browser.test_review_in_browser import log_in
from tests.review_pages.conftest import answer_changed_by_a_new_model

pytestmark = pytest.mark.browser


def test_a_changed_answer_comes_first_and_says_what_it_was(
    page, live_server, curator, tiny_taxonomy
):
    answer_changed_by_a_new_model(tiny_taxonomy)
    review_items_repredict(taxonomy=tiny_taxonomy)

    log_in(page, live_server, "carla", "carla-pass-123")
    expect(page.get_by_test_id("input-text")).to_have_text("Tax Clerk")
    expect(page.get_by_test_id("changed-answer")).to_have_text(
        "answer changed by jobs/v1: it was Baristas"
    )
    page.goto(f"{live_server.url}/review/queue/")
    first = page.get_by_test_id("queue-row").first
    expect(first).to_contain_text("Tax Clerk")
    expect(first.get_by_test_id("changed-badge")).to_be_visible()


def test_a_wrong_address_gets_a_page_with_the_menu_and_a_way_back(page, live_server, curator):
    log_in(page, live_server, "carla", "carla-pass-123")
    response = page.goto(f"{live_server.url}/review/no-such-page/")
    assert response.status == 404
    expect(page.get_by_test_id("not-found")).to_contain_text("There is no such page")
    expect(page.locator(".topbar nav")).to_be_visible()
    page.get_by_test_id("not-found-home").click()
    expect(page).to_have_url(f"{live_server.url}/review/")
