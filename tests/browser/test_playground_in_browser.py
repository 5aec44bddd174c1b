from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Input, ReviewItem

pytestmark = pytest.mark.browser


def log_in(page, live_server, username: str, password: str, path: str) -> None:
    page.goto(f"{live_server.url}{path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}{path}")


def test_typing_in_the_playground_shows_results_without_a_page_load_and_sends_to_review(
    page, live_server, curator, tiny_taxonomy
):
    log_in(page, live_server, "carla", "carla-pass-123", "/playground/")
    # A page load would wipe this mark; htmx swaps keep it.
    page.evaluate("window.playgroundMark = 'same page'")

    page.get_by_test_id("playground-text").press_sequentially("long haul truck")

    first = page.get_by_test_id("ranked-group").first
    expect(first).to_have_attribute("data-group-code", "53-3032")
    expect(first).to_contain_text("Heavy Truck Drivers")
    expect(first).to_have_attribute("data-source", "model")
    expect(page.get_by_test_id("model-version")).to_have_text("jobs/v1")
    expect(page.get_by_test_id("ranked-group")).to_have_count(5)
    assert page.evaluate("window.playgroundMark") == "same page"
    expect(page).to_have_url(f"{live_server.url}/playground/")
    assert not Input.objects.exists()  # looking stores nothing

    page.get_by_test_id("k").select_option("2")
    expect(page.get_by_test_id("ranked-group")).to_have_count(2)

    # Clearing the box is no mistake: the playground asks for a title, it shows no error.
    page.get_by_test_id("playground-text").fill("")
    expect(page.get_by_test_id("playground-prompt")).to_have_text(
        "Type a job title, such as “Sr. Java Dev”, to see the groups it matches."
    )
    expect(page.get_by_test_id("playground-error")).to_have_count(0)
    page.get_by_test_id("playground-text").fill("ICU nurse")
    expect(page.get_by_test_id("ranked-group").first).to_have_attribute(
        "data-group-code", "29-1141"
    )

    page.get_by_test_id("send-to-review").click()

    expect(page.get_by_test_id("sent")).to_contain_text(
        "Stored “ICU nurse” as a new input and queued it for review."
    )
    assert page.evaluate("window.playgroundMark") == "same page"
    stored = Input.objects.get()
    assert (stored.text, stored.source) == ("ICU nurse", "playground")
    assert ReviewItem.objects.get().input == stored
