"""A curator's 20-card keyboard session in Chromium leaves the browser console clean: no error,
no Content-Security-Policy violation, whichever verdicts the cards get."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.services.review.inputs import inputs_submit
from tests.browser.conftest import settled
from tests.browser.test_content_security_policy_in_browser import RECORD_VIOLATIONS
from tests.browser.test_review_in_browser import log_in
from tests.test_match_probability import RIGHT, WRONG

pytestmark = pytest.mark.browser

# Confirm, skip, undo and confirm again, false match then none of these.
KEYS = ["a", " ", "a", "u", "a", "x", "n", "a", " ", "a", "a", " ", "a", "x", "n", "a", "a", " ",
        "a", "a"]  # fmt: skip


def test_twenty_cards_by_keyboard_leave_no_console_error(page, live_server, curator, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=RIGHT + list(WRONG), source="api")
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, live_server, "carla", "carla-pass-123")
    cards = 0
    for key in KEYS:
        settled(page)
        shown = page.get_by_test_id("review-card").get_attribute("data-item-id")
        page.keyboard.press(key)
        if key in ("a", " ", "n"):
            expect(page.get_by_test_id("review-card")).not_to_have_attribute("data-item-id", shown)
            cards += 1
        elif key == "x":  # the card stays, asking for the right group
            expect(page.get_by_test_id("review-card")).to_have_attribute(
                "data-unavailable-keys", "a x"
            )
        else:  # undo: the card just judged comes back
            expect(page.get_by_test_id("review-card")).not_to_have_attribute("data-item-id", shown)
    settled(page)
    assert cards >= 15
    assert page.evaluate("window.__cspViolations") == []
    assert problems == []


def test_a_style_put_on_the_card_by_something_else_is_not_copied_by_the_next_swap(
    page, live_server, curator, tiny_taxonomy
):
    # A browser extension, a screenshot tool or a resized box can leave a style attribute on an
    # element of the card; htmx settled styles across swaps, and the policy refused each copy.
    inputs_submit(taxonomy=tiny_taxonomy, texts=RIGHT[:3], source="api")
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, live_server, "carla", "carla-pass-123")
    # Set as tools do it, from outside the page (a script of the page's own would be refused).
    devtools = page.context.new_cdp_session(page)
    for _ in range(2):
        settled(page)
        shown = page.get_by_test_id("review-card").get_attribute("data-item-id")
        root = devtools.send("DOM.getDocument")["root"]["nodeId"]
        search = devtools.send("DOM.querySelector", {"nodeId": root, "selector": "#group-search"})
        devtools.send(
            "DOM.setAttributeValue", {"nodeId": search["nodeId"], "name": "style", "value": ""}
        )
        assert page.locator("#group-search").get_attribute("style") == ""
        page.keyboard.press("a")
        expect(page.get_by_test_id("review-card")).not_to_have_attribute("data-item-id", shown)
    settled(page)
    # Setting it is refused, as any inline style is; the swaps add no refusal of their own.
    refused = page.evaluate("window.__cspViolations")
    assert refused and not [line for line in refused if "htmx" in line]
