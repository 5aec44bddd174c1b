from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Judgement, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from tests.browser.conftest import settled

pytestmark = pytest.mark.browser


@pytest.fixture
def queued(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Senior Java Engineer", "Java Barista"], source="demo"
    )


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/review/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/review/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}/review/")
    # The URL changes before the deferred scripts run: keys pressed now would go unheard.
    page.wait_for_load_state("load")


def test_a_curator_logs_in_confirms_one_item_and_reassigns_another(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    card = page.get_by_test_id("review-card")
    first_text = page.get_by_test_id("input-text").inner_text()
    first = ReviewItem.objects.get(input__text=first_text)
    expect(page.get_by_test_id("progress")).to_have_text("2 open · 0 done · 0 yours today")

    page.get_by_test_id("confirm").click()

    expect(page.get_by_test_id("progress")).to_have_text("1 open · 1 done · 1 yours today")
    expect(page.get_by_test_id("recent-verdict")).to_contain_text(f"{first_text} — Confirm")
    judgement = Judgement.objects.get(review_item=first)
    assert (judgement.verdict, judgement.user.username) == ("confirm", "carla")
    assert judgement.group_id == first.prediction.top_group_id

    second_text = page.get_by_test_id("input-text").inner_text()
    assert second_text != first_text
    settled(page)
    page.get_by_test_id("group-search").fill("barist")
    result = page.get_by_test_id("group-results").get_by_role("button", name="Baristas")
    result.click()

    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    expect(card).to_have_count(0)
    reassigned = Judgement.objects.get(review_item__input__text=second_text)
    assert (reassigned.verdict, reassigned.group.code) == ("reassign", "35-3023")
    assert Member.objects.filter(source="curator", group__code="35-3023", text=second_text).exists()


def test_a_refused_verdict_shows_its_reason_in_the_panel_and_keeps_the_card(
    page, live_server, curator, other_curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    shown = page.get_by_test_id("review-card").get_attribute("data-item-id")
    # Meanwhile the card's input comes in again and gets a new prediction.
    item = ReviewItem.objects.get(id=shown)
    inputs_submit(taxonomy=item.taxonomy, texts=[item.input.text], source="api")

    page.get_by_test_id("confirm").click()

    expect(page.get_by_test_id("error")).to_contain_text("prediction changed")
    expect(page.get_by_test_id("review-card")).to_have_attribute("data-item-id", shown)
    assert not Judgement.objects.exists()
    page.get_by_test_id("confirm").click()  # the card now shows the new prediction
    expect(page.get_by_test_id("recent-verdict")).to_have_count(1)
    assert Judgement.objects.get().review_item_id == int(shown)


def test_the_filter_bar_narrows_the_card_and_blind_mode_hides_scores(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    expect(page.locator(".review-card .score").first).to_be_visible()
    filters = page.get_by_test_id("filters")
    filters.get_by_label("Group code").fill("35-3023")
    filters.get_by_label("Taxonomy").select_option("jobs")
    filters.get_by_label("Blind (hide scores)").check()
    filters.get_by_role("button", name="Apply").click()

    expect(page.get_by_test_id("input-text")).to_have_text("Java Barista")
    expect(page.locator(".score")).to_have_count(0)
    page.get_by_test_id("confirm").click()
    expect(page.get_by_test_id("recent-verdict")).to_have_count(1)
    # The filters held across the verdict: nothing else of that group is left.
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    assert page.url.endswith(
        "/review/?taxonomy=jobs&group=35-3023&score_min=&score_max=&status=&blind=1"
    )
    judgement = Judgement.objects.get()
    assert (judgement.verdict, judgement.review_item.input.text) == ("confirm", "Java Barista")
