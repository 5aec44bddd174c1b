"""A verdict whose request fails (no answer, or a 503) is sent again with the same idempotency
key: stored exactly once, and the card never moves on past a verdict the server has not
stored."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest
from playwright.sync_api import expect

from annotations.models import Judgement
from annotations.services.review.inputs import inputs_submit
from tests.browser.test_review_in_browser import log_in
from tests.browser.test_review_keyboard import shown_item, verdicts_today

pytestmark = pytest.mark.browser

JUDGE = "**/review/items/*/judge*"
# Each test routes before the page loads: once, in CI, a route added under the loaded page let
# the first verdict through untouched, and the test passed its count with nothing intercepted.
# Every wait of review.js's retries together is under four seconds; this leaves room to spare.
RETRIES_DONE_MS = 20_000


@pytest.fixture
def queued(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Senior Java Engineer", "truck driver"], source="demo"
    )


def key_of(request) -> str:
    return parse_qs(request.post_data)["idempotency_key"][0]


def test_a_verdict_stored_but_whose_answer_was_lost_is_sent_again_and_stored_once(
    page, live_server, curator, queued
):
    sent = []

    def lose_the_first_answer(route):
        sent.append(key_of(route.request))
        if len(sent) == 1:
            route.fetch()  # the server stores the verdict ...
            route.abort("connectionreset")  # ... and its answer never reaches the page
        else:
            route.continue_()

    page.route(JUDGE, lose_the_first_answer)
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    verdicts_today(page, 0)
    page.keyboard.press("a")
    verdicts_today(page, 1)
    expect(page.get_by_test_id("review-card")).not_to_have_attribute("data-item-id", str(item.id))
    assert len(sent) == 2 and sent[0] == sent[1] != ""
    judgement = Judgement.objects.get()
    assert (judgement.review_item_id, judgement.verdict) == (item.id, "confirm")
    assert judgement.idempotency_key == sent[0]


def test_a_verdict_answered_503_once_is_sent_again_and_stored_once(
    page, live_server, curator, queued
):
    sent = []

    def unavailable_once(route):
        sent.append(key_of(route.request))
        if len(sent) == 1:
            route.fulfill(status=503, body="Service Unavailable")
        else:
            route.continue_()

    page.route(JUDGE, unavailable_once)
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    verdicts_today(page, 0)
    page.keyboard.press("n")
    verdicts_today(page, 1)
    assert len(sent) == 2 and sent[0] == sent[1]
    assert list(Judgement.objects.values_list("review_item_id", "verdict")) == [(item.id, "none")]


def test_a_reassign_picked_from_the_search_is_sent_again_with_its_key(
    page, live_server, curator, queued
):
    sent = []

    def unreachable_once(route):
        sent.append(key_of(route.request))
        if len(sent) == 1:
            route.abort()
        else:
            route.continue_()

    page.route(JUDGE, unreachable_once)
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    verdicts_today(page, 0)
    page.keyboard.press("r")
    page.keyboard.type("barist")
    expect(page.get_by_test_id("group-results").get_by_role("button")).to_have_count(1)
    page.keyboard.press("Enter")
    verdicts_today(page, 1)
    assert len(sent) == 2 and sent[0] == sent[1] != ""
    judgement = Judgement.objects.get()
    assert (judgement.review_item_id, judgement.verdict, judgement.group.code) == (
        item.id,
        "reassign",
        "35-3023",
    )


def test_a_verdict_that_keeps_failing_keeps_the_card_and_says_it_was_not_stored(
    page, live_server, curator, queued
):
    sent = []

    def always_unavailable(route):
        sent.append(key_of(route.request))
        route.fulfill(status=503, body="Service Unavailable")

    page.route(JUDGE, always_unavailable)
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    verdicts_today(page, 0)
    page.keyboard.press("a")
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("Trying again")
    expect(error).to_contain_text("could not be stored", timeout=RETRIES_DONE_MS)
    expect(page.get_by_test_id("review-card")).to_have_attribute("data-item-id", str(item.id))
    assert len(sent) == 4 and len(set(sent)) == 1
    assert not Judgement.objects.exists()

    # The server is back: the same key again, pressed by the curator, stores it once.
    page.unroute(JUDGE)
    page.keyboard.press("a")
    verdicts_today(page, 1)
    judgement = Judgement.objects.get()
    assert (judgement.review_item_id, judgement.idempotency_key) == (item.id, sent[0])
