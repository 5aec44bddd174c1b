from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit
from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser


@pytest.fixture
def queued(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy,
        texts=["Senior Java Engineer", "Java Barista", "icu staff nurse", "truck driver"],
        source="demo",
    )


def shown_item(page) -> ReviewItem:
    return ReviewItem.objects.get(
        id=page.get_by_test_id("review-card").get_attribute("data-item-id")
    )


def verdicts_today(page, count: int) -> None:
    expect(page.get_by_test_id("progress")).to_contain_text(f"· {count} yours today")


def test_a_curator_works_the_queue_with_the_keyboard_alone(page, live_server, curator, queued):
    log_in(page, live_server, "carla", "carla-pass-123")

    confirmed = shown_item(page)
    page.keyboard.press("a")
    verdicts_today(page, 1)
    judgement = Judgement.objects.get(review_item=confirmed)
    assert (judgement.verdict, judgement.group_id) == ("confirm", confirmed.top_group_id)

    rejected = shown_item(page)
    assert rejected.id != confirmed.id
    page.keyboard.press("x")
    # Half done, the same card comes back without the rejected group.
    expect(page.get_by_text("false match: pick the right group")).to_be_visible()
    verdicts_today(page, 1)  # the false match alone puts the input nowhere
    assert shown_item(page).id == rejected.id
    assert ReviewItem.objects.get(id=rejected.id).status == ReviewItem.Status.AWAITING_GROUP
    second_choice = rejected.prediction.ranked_groups[1]
    page.keyboard.press("1")
    verdicts_today(page, 2)  # with its group picked, one input more
    assert [
        (j.verdict, j.group_id, j.rejected_group_id) for j in rejected.judgements.order_by("id")
    ] == [
        ("false_match", None, rejected.top_group_id),
        ("reassign", second_choice["group_id"], None),
    ]

    nothing = shown_item(page)
    page.keyboard.press("n")
    verdicts_today(page, 3)
    assert Judgement.objects.get(review_item=nothing).verdict == "none"

    skipped = shown_item(page)
    page.keyboard.press(" ")
    # A skip puts the input nowhere: the count stays. Nothing else is open, so the skipped card
    # comes back, saying so.
    expect(page.get_by_test_id("review-card")).to_contain_text("skipped earlier")
    verdicts_today(page, 3)
    assert Judgement.objects.get(review_item=skipped).verdict == "skip"
    assert ReviewItem.objects.get(id=skipped.id).status == ReviewItem.Status.SKIPPED

    page.keyboard.press("u")
    expect(page.get_by_test_id("notice")).to_contain_text("Verdict undone")
    verdicts_today(page, 3)
    expect(page.get_by_test_id("review-card")).to_have_attribute("data-item-id", str(skipped.id))
    undone = Judgement.objects.get(review_item=skipped)
    assert undone.undone_at is not None
    item = ReviewItem.objects.get(id=skipped.id)
    assert (item.status, item.leased_by.username) == (ReviewItem.Status.PENDING, "carla")


def test_reassign_by_typing_a_search_and_picking_with_the_arrow_keys(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    search = page.get_by_test_id("group-search")

    page.keyboard.press("r")
    expect(search).to_be_focused()
    expect(search).to_have_value("")  # the "r" opened the box, it was not typed into it
    page.keyboard.type("truck dri")
    results = page.get_by_test_id("group-results")
    expect(results.get_by_role("button")).to_have_count(1)
    expect(results.get_by_role("button")).to_contain_text("Heavy Truck Drivers")
    page.keyboard.press("ArrowDown")
    expect(results.locator(".active")).to_contain_text("Heavy Truck Drivers")
    page.keyboard.press("Enter")

    verdicts_today(page, 1)
    judgement = Judgement.objects.get(review_item=item)
    assert (judgement.verdict, judgement.group.code) == ("reassign", "53-3032")


def test_keys_typed_in_the_search_box_are_not_shortcuts_until_escape(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    search = page.get_by_test_id("group-search")
    page.keyboard.press("r")
    page.keyboard.type("nurse xa u")  # n, u, x, a and space are all shortcuts elsewhere
    expect(search).to_have_value("nurse xa u")
    # No name or title holds "xa": the encoder's nearest group for the whole text is offered.
    expect(page.get_by_test_id("group-results")).to_contain_text("Registered Nurses similar")
    assert not Judgement.objects.exists()

    page.keyboard.press("Escape")
    expect(search).not_to_be_focused()
    page.keyboard.press("n")
    verdicts_today(page, 1)
    assert Judgement.objects.get().review_item_id == item.id


def test_two_curators_never_see_the_same_card(browser, live_server, curator, other_curator, queued):
    pages = {}
    for username in ("carla", "oscar"):
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live_server, username, f"{username}-pass-123")
        pages[username] = page
    seen: dict[str, list[int]] = {"carla": [], "oscar": []}
    try:
        for round_ in range(1, 3):
            shown = {name: shown_item(page).id for name, page in pages.items()}
            assert shown["carla"] != shown["oscar"]
            for name, page in pages.items():
                seen[name].append(shown[name])
                page.keyboard.press("a")
                verdicts_today(page, round_)
        for page in pages.values():
            expect(page.get_by_test_id("queue-empty")).to_be_visible()
    finally:
        for page in pages.values():
            page.context.close()
    assert not set(seen["carla"]) & set(seen["oscar"])
    assert sorted(seen["carla"] + seen["oscar"]) == sorted(item.id for item in queued)
    judged = Judgement.objects.values_list("review_item_id", "user__username")
    assert sorted(judged) == sorted(
        (item_id, name) for name, ids in seen.items() for item_id in ids
    )


def test_after_a_keyboard_reassign_the_next_keys_are_shortcuts_again(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    search = page.get_by_test_id("group-search")
    page.keyboard.press("r")
    page.keyboard.type("truck dri")
    expect(page.get_by_test_id("group-results").get_by_role("button")).to_have_count(1)
    page.keyboard.press("Enter")
    verdicts_today(page, 1)
    expect(search).not_to_be_focused()  # the next card's box, had focus come back to it
    following = shown_item(page)
    page.keyboard.press("Space")  # a skip, not a space typed into the box
    expect(page.get_by_test_id("review-card")).not_to_have_attribute(
        "data-item-id", str(following.id)
    )
    verdicts_today(page, 1)  # a skip puts the input nowhere
    expect(search).to_have_value("")
    assert Judgement.objects.get(review_item=following).verdict == "skip"


def test_reassign_search_finds_a_group_by_a_members_title(page, live_server, curator, queued):
    """ "python" names no group; Software Developers has the member "Python Developer", and the
    result says so."""
    log_in(page, live_server, "carla", "carla-pass-123")
    page.keyboard.press("r")
    page.keyboard.type("python")
    results = page.get_by_test_id("group-results")
    first = results.get_by_role("button").first
    expect(first).to_contain_text("Software Developers")
    expect(first.get_by_test_id("found-by")).to_have_text("has “Python Developer”")


def test_u_after_a_false_match_and_the_group_then_picked_takes_both_back(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    page.keyboard.press("x")
    expect(page.get_by_test_id("next-step")).to_contain_text("False match recorded")
    page.keyboard.press("1")  # the right group, on the card that came back
    verdicts_today(page, 1)

    page.keyboard.press("u")

    verdicts_today(page, 0)
    expect(page.get_by_test_id("review-card")).to_have_attribute("data-item-id", str(item.id))
    # The card is as it was before the x: its predicted group offered again, nothing waiting.
    expect(page.get_by_test_id("next-step")).to_have_count(0)
    expect(page.get_by_test_id("false-match")).to_be_visible()
    assert not Judgement.objects.live().exists()
    assert ReviewItem.objects.get(id=item.id).status == ReviewItem.Status.PENDING
