"""The API docs page (Swagger UI, outside the site's frame) has a visible way back to the app."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser


def test_the_api_docs_link_back_to_the_app(page, live_server, curator, tiny_taxonomy):
    log_in(page, live_server, "carla", "carla-pass-123")
    page.get_by_role("link", name="API", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/api/v1/docs")
    expect(page.locator("#swagger-ui")).to_contain_text("Siamweb API")  # the docs rendered

    back = page.get_by_role("link", name="← Back to Siamweb")
    expect(back).to_be_visible()
    back.click()

    expect(page).to_have_url(f"{live_server.url}/review/")
