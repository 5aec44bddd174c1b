"""A curator finds a verdict given days ago through the queue's Done filter, opens the input's
page, changes the verdict and judges the card again from the keyboard."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Group, Judgement
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from tests.browser.test_review_in_browser import log_in
from tests.browser.test_review_keyboard import shown_item

pytestmark = pytest.mark.browser


def test_a_done_verdict_is_found_changed_and_judged_again(
    page, live_server, curator, tiny_taxonomy
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement_create(review_item=item, user=curator, verdict="confirm")
    log_in(page, live_server, "carla", "carla-pass-123")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()  # nothing open is left

    page.goto(f"{live_server.url}/review/queue/?status=done")
    page.get_by_test_id("input-link").filter(has_text="Java Barista").click()
    history = page.get_by_test_id("verdict-history")
    expect(history.get_by_test_id("verdict-row")).to_have_count(1)
    page.get_by_test_id("reopen").click()

    expect(page.get_by_test_id("input-text")).to_have_text("Java Barista")
    assert shown_item(page).id == item.id
    page.keyboard.press("r")
    page.keyboard.type("accountants")
    results = page.get_by_test_id("group-results")
    expect(results.get_by_role("button").first).to_contain_text("Accountants")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    verdicts = list(Judgement.objects.order_by("id"))
    assert [(j.verdict, j.undone_at is not None) for j in verdicts] == [
        ("confirm", True),
        ("reassign", False),
    ]
    assert verdicts[1].group == Group.objects.get(taxonomy=tiny_taxonomy, code="13-2011")
