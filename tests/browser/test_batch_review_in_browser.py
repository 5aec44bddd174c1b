from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import FeedbackPair, Group, Judgement, Prediction, ReviewItem
from annotations.services.review.inputs import inputs_submit
from tests.browser.test_review_in_browser import log_in

pytestmark = pytest.mark.browser


@pytest.fixture
def developers(tiny_taxonomy):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=[f"Java Developer {n}" for n in range(10)], source="api"
    )
    return list(ReviewItem.objects.filter(top_group__code="15-1252").order_by("-priority", "id"))


def tile(page, item: ReviewItem):
    return page.locator(f'[data-testid="tile"][data-item-id="{item.id}"]')


def test_a_curator_marks_two_false_matches_and_confirms_the_rest(
    page, live_server, curator, developers
):
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/")
    page.get_by_role("link", name="Review in batches →").click()
    expect(page.get_by_test_id("tile")).to_have_count(10)
    boxes = page.locator("[data-tile]")
    expect(boxes.nth(0)).to_be_focused()

    # One by mouse ...
    tile(page, developers[4]).click()
    expect(tile(page, developers[4]).locator("[data-tile]")).to_be_checked()
    # ... one by keyboard: j j from the first tile, then x.
    boxes.nth(0).focus()
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(boxes.nth(2)).to_be_focused()
    page.keyboard.press("x")
    expect(boxes.nth(2)).to_be_checked()
    # Space toggles exactly once: on and off again.
    page.keyboard.press("ArrowRight")
    page.keyboard.press(" ")
    expect(boxes.nth(3)).to_be_checked()
    page.keyboard.press(" ")
    expect(boxes.nth(3)).not_to_be_checked()
    expect(page.get_by_test_id("batch-summary")).to_have_text("8 to confirm · 2 false matches")

    page.keyboard.press("Enter")

    expect(page.get_by_test_id("batch-done")).to_have_text(
        "Just done: 8 confirmed · 2 false matches."
    )
    expect(page.get_by_test_id("batch-empty")).to_be_visible()
    rejected = {developers[2].id, developers[4].id}
    verdicts = dict(Judgement.objects.values_list("review_item_id", "verdict"))
    assert verdicts == {
        item.id: "false_match" if item.id in rejected else "confirm" for item in developers
    }
    assert FeedbackPair.objects.filter(label=False, origin="false_match").count() == 2
    assert FeedbackPair.objects.filter(label=True, origin="confirm").count() == 8


def test_arrow_keys_move_by_rows_in_the_grid(page, live_server, curator, developers):
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/15-1252/")
    boxes = page.locator("[data-tile]")
    expect(boxes.nth(0)).to_be_focused()
    per_row = page.evaluate(
        """() => { const tiles = [...document.querySelectorAll('.tile')];
                   return tiles.filter(t => t.offsetTop === tiles[0].offsetTop).length; }"""
    )
    assert 1 < per_row < 10
    page.keyboard.press("ArrowDown")
    expect(boxes.nth(per_row)).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(boxes.nth(0)).to_be_focused()
    page.keyboard.press("k")  # already first: stays
    expect(boxes.nth(0)).to_be_focused()


def test_a_refused_batch_shows_why_and_keeps_the_marks(page, live_server, curator, developers):
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/15-1252/")
    expect(page.get_by_test_id("tile")).to_have_count(10)
    tile(page, developers[1]).click()
    # Meanwhile a new model re-predicts one item: it is no longer a Software Developer.
    moved = developers[7]
    baristas = Group.objects.get(taxonomy__slug="jobs", code="35-3023")
    prediction = Prediction.objects.create(
        input_id=moved.input_id,
        model_version_id=moved.prediction.model_version_id,
        ranked_groups=[],
        top_group=baristas,
        top_score=0.9,
    )
    ReviewItem.objects.filter(id=moved.id).update(prediction=prediction, top_group=baristas)
    page.get_by_test_id("confirm-rest").click()

    expect(page.get_by_test_id("error")).to_contain_text(
        f"item {moved.id} is no longer predicted as Software Developers"
    )
    expect(page.get_by_test_id("tile")).to_have_count(9)
    expect(tile(page, developers[1]).locator("[data-tile]")).to_be_checked()
    assert not Judgement.objects.exists()
