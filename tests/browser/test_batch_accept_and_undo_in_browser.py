"""Batch review in Chromium: the groups list promises what the page shows, an emptied batch does
not claim items are open, a batch can be undone, and "accept all above p" confirms only the
tiles the match probability vouches for."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Judgement, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from tests.browser.test_batch_review_in_browser import tile
from tests.browser.test_review_in_browser import log_in
from tests.test_batch_review_counts import make_unavailable, submit_calibrated

pytestmark = pytest.mark.browser


@pytest.fixture
def developers(tiny_taxonomy):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=[f"Java Developer {n}" for n in range(10)], source="api"
    )
    return list(ReviewItem.objects.filter(top_group__code="15-1252").order_by("-priority", "id"))


@pytest.fixture
def calibrated(tiny_taxonomy, other_curator) -> dict[int, float]:
    return submit_calibrated(tiny_taxonomy, other_curator)


def test_the_groups_list_and_the_batch_agree_and_an_empty_batch_says_so(
    page, live_server, curator, other_curator, developers
):
    make_unavailable(developers, curator, other_curator)
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/")
    row = page.get_by_test_id("batch-group").filter(has_text="15-1252")
    expect(row.locator("td.num")).to_have_text("7")

    row.get_by_role("link", name="Review in batches →").click()

    expect(page.get_by_test_id("tile")).to_have_count(7)
    expect(page.get_by_test_id("batch-open")).to_have_text("7")
    # The page is wired up (htmx, then the batch's keys) once its first tile has focus.
    expect(page.locator("[data-tile]").first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("batch-done")).to_have_text(
        "Just done: 7 confirmed · 0 false matches."
    )
    expect(page.get_by_test_id("batch-empty")).to_be_visible()
    # Nothing above it says the group still has open items.
    expect(page.get_by_test_id("batch-open")).to_have_count(0)
    expect(page.locator("#batch-panel")).not_to_contain_text("open for this group")


def test_a_curator_undoes_the_batch_just_submitted(page, live_server, curator, developers):
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/15-1252/")
    expect(page.get_by_test_id("tile")).to_have_count(10)
    tile(page, developers[3]).click()
    page.get_by_test_id("confirm-rest").click()
    expect(page.get_by_test_id("batch-done")).to_have_text(
        "Just done: 9 confirmed · 1 false match."
    )
    assert Judgement.objects.live().count() == 10

    # u, as on the card, takes the whole batch back.
    page.locator("body").press("u")

    expect(page.get_by_test_id("notice")).to_have_text("Batch undone: 10 verdicts taken back.")
    expect(page.get_by_test_id("tile")).to_have_count(10)
    expect(page.get_by_test_id("batch-undo")).to_have_count(0)
    assert not Judgement.objects.live().exists()
    assert not Member.objects.filter(source=Member.Source.CURATOR).exists()
    assert set(ReviewItem.objects.values_list("status", flat=True)) == {"pending"}


def test_accept_all_above_p_confirms_the_likely_tiles_and_leaves_the_rest(
    page, live_server, curator, calibrated
):
    ranked = sorted(calibrated, key=calibrated.get, reverse=True)
    # A p between two tiles' probabilities: the first few reach it, at least two do not.
    cut = max(i for i in range(2, 7) if calibrated[ranked[i - 1]] > calibrated[ranked[i]])
    p = round((calibrated[ranked[cut - 1]] + calibrated[ranked[cut]]) / 2, 4)
    assert calibrated[ranked[cut - 1]] > p > calibrated[ranked[cut]]
    above, below = ranked[:cut], ranked[cut:]
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/15-1252/")
    expect(page.get_by_test_id("tile")).to_have_count(8)
    expect(page.get_by_test_id("tile-probability")).to_have_count(8)

    box = page.get_by_test_id("accept-min")
    box.fill(str(p))
    expect(page.get_by_test_id("accept-summary")).to_have_text(
        f"{cut} of 8 would be confirmed; the rest stay open"
    )
    for item_id in above:
        expect(page.locator(f'[data-item-id="{item_id}"]')).to_have_class("tile tile-above")
    # A tile marked a false match is never accepted.
    page.locator(f'[data-item-id="{above[0]}"]').click()
    expect(page.get_by_test_id("accept-summary")).to_have_text(
        f"{cut - 1} of 8 would be confirmed; the rest stay open"
    )
    # Enter in the box accepts above p (it does not confirm the whole batch).
    box.press("Enter")

    expect(page.get_by_test_id("batch-done")).to_have_text(
        f"Just done: {cut - 1} confirmed · 1 false match."
    )
    expect(page.get_by_test_id("tile")).to_have_count(len(below))
    verdicts = dict(Judgement.objects.filter(user=curator).values_list("review_item_id", "verdict"))
    assert verdicts == {i: "false_match" if i == above[0] else "confirm" for i in above}
    assert set(ReviewItem.objects.filter(id__in=below).values_list("status", flat=True)) == {
        "pending"
    }


def test_a_batch_left_behind_is_undone_later_from_the_batch_pages(
    page, live_server, curator, developers
):
    log_in(page, live_server, "carla", "carla-pass-123")
    page.goto(f"{live_server.url}/review/batch/jobs/15-1252/")
    expect(page.get_by_test_id("tile")).to_have_count(10)
    page.get_by_test_id("confirm-rest").click()
    expect(page.get_by_test_id("batch-done")).to_contain_text("10 confirmed")

    page.goto(f"{live_server.url}/review/batch/jobs/")  # the result page is left
    batch = page.get_by_test_id("recent-batch")
    expect(batch).to_have_count(1)
    expect(batch).to_contain_text("Software Developers")
    batch.get_by_test_id("recent-batch-undo").click()
    expect(page.get_by_test_id("notice").first).to_have_text(
        "Batch undone: 10 verdicts taken back."
    )
    assert not Judgement.objects.live().exists()
