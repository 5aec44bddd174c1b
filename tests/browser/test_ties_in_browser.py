"""Issue #43, points 1 and 2, as a curator sees them in Chromium: each group headed by its
probability, in the order the groups are listed, with the member's similarity beside it as
evidence; an answer whose first groups are too close to tell apart says so and asks the
curator to choose; blind mode shows none of it; on a phone the note and the first group are on
the first screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.services.review.inputs import inputs_submit
from models_app.serving.normalize import TIE_GAP
from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser

# Short texts that name no group more than another: the starter ranker's chances come close.
AMBIGUOUS = ["Staff", "Attendant", "Java Barista", "Senior Staff", "Nurse Accountant"]


@pytest.fixture
def tied_card(tiny_taxonomy):
    """The review page's address filtered to a group whose every queued item has a tied answer
    (so whichever the queue offers first is tied), and each item's ranked groups by its id."""
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=AMBIGUOUS, source="demo")
    ranked = {item.id: item.prediction.ranked_groups for item in items}
    tied = {item.id for item in items if ranked[item.id][0]["tied"]}
    assert tied, "none of the ambiguous texts has a tied answer"
    for item_id in tied:
        first, second = ranked[item_id][:2]
        # Tied as TIE_GAP says: the runner-up's chance is within the gap of the first's.
        assert second["tied"] and first["probability"] - second["probability"] < TIE_GAP
    codes = {item.top_group.code for item in items if item.id in tied} - {
        item.top_group.code for item in items if item.id not in tied
    }
    assert codes, "every group some tied answer heads also heads an answer that is not tied"
    return f"/review/?taxonomy=jobs&group={min(codes)}", ranked


def shown_groups(page, ranked) -> list[dict]:
    """The ranked groups of the card on the page, in the card's order."""
    item_id = int(page.get_by_test_id("review-card").get_attribute("data-item-id"))
    groups = {group["code"]: group for group in ranked[item_id]}
    codes = page.get_by_test_id("group-option").locator(".code").all_inner_texts()
    return [groups[code] for code in codes]


def test_a_tied_answer_is_marked_and_asks_the_curator_to_choose_and_blind_mode_hides_it(
    page, live_server, curator, tied_card
):
    address, ranked = tied_card
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}{address}")

    options = page.get_by_test_id("group-option")
    expect(options.first).to_be_visible()
    groups = shown_groups(page, ranked)
    tied = sum(group["tied"] for group in groups)
    assert tied >= 2
    note = page.get_by_test_id("tie-note")
    expect(note).to_be_visible()
    expect(note).to_have_text(
        f"The first {tied} groups are tied: their chances are too close to tell apart, "
        "so choose between them."
    )
    badges = page.get_by_test_id("option-tied")
    expect(badges).to_have_count(tied)
    for badge in badges.all():
        expect(badge).to_be_visible()
        expect(badge).to_have_text("tied")
    # The tied groups are the first ones, each badge on its own group.
    for position, group in enumerate(groups):
        expect(options.nth(position).get_by_test_id("option-tied")).to_have_count(
            int(group["tied"])
        )

    # The probability heads each group, in the order the groups are listed.
    shown = [float(text) for text in page.get_by_test_id("option-probability").all_inner_texts()]
    assert shown == [round(group["probability"], 2) for group in groups]
    assert shown == sorted(shown, reverse=True)
    # Each group's similarity is there as the evidence's, beside the member it matched.
    for position, group in enumerate(groups):
        evidence = options.nth(position).get_by_test_id("evidence")
        expect(evidence).to_be_visible()
        expect(evidence).to_contain_text(f"matched “{group['member']}”")
        expect(evidence.get_by_test_id("option-similarity")).to_have_text(
            f"(similarity {group['score']:.2f})"
        )

    # In blind mode the same card shows no chance, no similarity and no tie: only the evidence,
    # the member each group matched, without its number.
    page.goto(f"{live_server.url}{address}&blind=1")
    expect(options.first).to_be_visible()
    blind_groups = shown_groups(page, ranked)
    assert sum(group["tied"] for group in blind_groups) >= 2
    card = page.get_by_test_id("review-card")
    for testid in ("tie-note", "option-tied", "option-probability", "option-similarity"):
        expect(card.get_by_test_id(testid)).to_have_count(0)
    for position, group in enumerate(blind_groups):
        expect(options.nth(position).get_by_test_id("evidence")).to_have_text(
            f"matched “{group['member']}”"
        )


def test_on_a_phone_the_tie_note_and_the_first_group_are_on_the_first_screen(
    page, live_server, curator, tied_card
):
    address, _ = tied_card
    page.set_viewport_size({"width": 375, "height": 667})
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}{address}")

    note = page.get_by_test_id("tie-note")
    first = page.get_by_test_id("group-option").first
    expect(note).to_be_in_viewport(ratio=1)
    expect(first).to_be_in_viewport(ratio=1)
    for box in (note.bounding_box(), first.bounding_box()):
        assert box["y"] >= 0 and box["y"] + box["height"] <= 667
    assert page.evaluate("window.scrollY") == 0
