"""Fifty verdicts from the keyboard alone: confirm, pick, reassign by search, skip, false match
then the right group, none of these, undo; the database holds exactly the verdicts pressed."""

from __future__ import annotations

import itertools

import pytest
from playwright.sync_api import expect

from annotations.models import Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit
from tests.browser.test_review_in_browser import log_in
from tests.browser.test_review_keyboard import shown_item, verdicts_today

pytestmark = pytest.mark.browser

PREFIXES = [
    "senior", "junior", "lead", "night", "trainee", "chief",
    "assistant", "relief", "remote", "part time", "contract", "head",
]  # fmt: skip
BASES = ["java developer", "staff nurse", "coffee barista", "truck driver", "tax accountant"]
# A search that finds exactly one group, for each group of the tiny taxonomy.
SEARCHES = {
    "15-1252": "software",
    "29-1141": "registered",
    "35-3023": "barist",
    "53-3032": "truck dri",
    "13-2011": "accountant",
}
# One round of keys: net eight verdicts (the x and the 1 judge one card; u takes one back).
ROUND = ["a", "2", "r", " ", "x", "1", "n", "a", "u", "a"]
TARGET = 50
FINAL = set(Judgement.FINAL_VERDICTS)  # the verdicts that put an input somewhere


@pytest.fixture
def sixty_inputs(tiny_taxonomy):
    texts = [f"{prefix} {base}" for prefix, base in itertools.product(PREFIXES, BASES)]
    return inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="demo")


def options_of(item: ReviewItem, *, rejected: set[int]) -> list[dict]:
    return [g for g in item.prediction.ranked_groups if g["group_id"] not in rejected]


def test_fifty_verdicts_from_the_keyboard_alone_are_stored_exactly(
    page, live_server, curator, sixty_inputs
):
    log_in(page, live_server, "carla", "carla-pass-123")
    # The shortcuts list opens and closes from the keyboard too.
    page.keyboard.press("?")
    expect(page.get_by_test_id("shortcuts-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("shortcuts-help")).to_be_hidden()

    # (item id, verdict, group id, rejected group id) of every verdict that should count.
    expected: list[tuple[int, str, int | None, int | None]] = []
    undone: list[tuple[int, str]] = []
    keys = itertools.cycle(ROUND)
    while len(expected) < TARGET:
        key = next(keys)
        item = shown_item(page)
        top = item.prediction.ranked_groups[0]["group_id"]
        if key == "a":
            expected.append((item.id, "confirm", top, None))
        elif key == "2":
            second = item.prediction.ranked_groups[1]["group_id"]
            expected.append((item.id, "reassign", second, top))
        elif key == "r":
            code, query = next((c, q) for c, q in SEARCHES.items() if c != item.top_group.code)
            page.keyboard.press("r")
            page.keyboard.type(query)
            expect(page.get_by_test_id("group-results").get_by_role("button")).to_have_count(1)
            key = "Enter"
            group = item.taxonomy.groups.get(code=code).id
            expected.append((item.id, "reassign", group, top))
        elif key == " ":
            expected.append((item.id, "skip", None, None))
        elif key == "x":
            expected.append((item.id, "false_match", None, top))
        elif key == "1":
            # The card that came back after x: its first option is the best group left.
            assert item.status == ReviewItem.Status.AWAITING_GROUP
            first = options_of(item, rejected={top})[0]["group_id"]
            expected.append((item.id, "reassign", first, None))
        elif key == "n":
            expected.append((item.id, "none", None, top))
        elif key == "u":
            item_id, verdict, *_ = expected.pop()
            undone.append((item_id, verdict))
        page.keyboard.press(key)
        # A skip and a false match put the input nowhere: the count stays, so wait for the card.
        if key == " ":
            expect(page.get_by_test_id("review-card")).not_to_have_attribute(
                "data-item-id", str(item.id)
            )
        elif key == "x":
            expect(page.get_by_test_id("next-step")).to_contain_text("False match recorded")
        verdicts_today(page, len({row[0] for row in expected if row[1] in FINAL}))
        if key == "u":
            expect(page.get_by_test_id("review-card")).to_have_attribute(
                "data-item-id", str(undone[-1][0])
            )

    assert len(expected) == TARGET
    live = Judgement.objects.live().filter(user=curator)
    stored = sorted(live.values_list("review_item_id", "verdict", "group_id", "rejected_group_id"))
    assert stored == sorted(expected)
    taken_back = Judgement.objects.filter(user=curator, undone_at__isnull=False)
    assert sorted(taken_back.values_list("review_item_id", "verdict")) == sorted(undone)
    assert len(undone) == 6
