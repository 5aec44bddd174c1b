"""A curator who opens an admin page gets the site's own 403 page with a way back; the upload
form needs no taxonomy picked when there is only one."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser


def test_a_curator_opening_an_admin_page_gets_a_403_in_the_sites_frame(
    page, live_server, curator, tiny_taxonomy
):
    log_in(page, live_server, "carla", "carla-pass-123")

    response = page.goto(f"{live_server.url}/audit/")

    assert response.status == 403
    expect(page).to_have_title("Not for you · Siamweb")
    expect(page.get_by_role("link", name="Siamweb")).to_be_visible()  # the site's header
    expect(page.get_by_test_id("forbidden")).to_contain_text("Only admins can use this page")
    page.get_by_test_id("forbidden-home").click()
    expect(page).to_have_url(f"{live_server.url}/review/")


def test_the_upload_form_preselects_the_only_taxonomy(page, live_server, curator, tiny_taxonomy):
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/inputs/upload/")
    taxonomy = page.get_by_label("Taxonomy")
    expect(taxonomy).to_have_value("jobs")
    expect(taxonomy.locator("option")).to_have_count(1)
