"""The queue table, a page of fifty with its next-page link and the filters kept; and the card and
queue pages cost the same few queries however many items wait."""

from __future__ import annotations

import re

import pytest

from annotations.models import ReviewItem
from annotations.selectors.card import review_items_probability
from annotations.services.review.leases import review_item_claim
from annotations.services.review.verdicts import judgement_create
from tests.review_pages.conftest import HTMX, answer_changed_by_a_new_model, card_item_id


def test_the_queue_lists_fifty_items_and_links_the_next_page(client, curator, many_items):
    client.force_login(curator)
    response = client.get("/review/queue/")
    assert response.status_code == 200
    page = response.content.decode()
    first_page = [int(i) for i in re.findall(r'data-testid="queue-row" data-item-id="(\d+)"', page)]
    in_order = list(ReviewItem.objects.order_by("-priority", "id").values_list("id", flat=True))
    assert first_page == in_order[:50]
    next_url = re.search(r'href="([^"]+)" rel="next"', page).group(1).replace("&amp;", "&")
    second = client.get(next_url)
    assert second.status_code == 200
    second_page = [
        int(i)
        for i in re.findall(
            r'data-testid="queue-row" data-item-id="(\d+)"', second.content.decode()
        )
    ]
    assert second_page == in_order[50:]
    assert 'rel="next"' not in second.content.decode()


def test_the_queue_shows_who_holds_an_item_and_the_chance_the_card_shows(
    client, curator, other_curator, items
):
    held = review_item_claim(user=other_curator)
    client.force_login(curator)
    page = client.get("/review/queue/").content.decode()
    row = re.search(rf'data-item-id="{held.id}">(.*?)</tr>', page, re.S).group(1)
    assert "oscar" in row
    # The card's figure, the probability; the similarity only as the cell's title.
    chance = review_items_probability([held])[held.id]
    assert re.search(rf'class="num score"[^>]*>{chance:.2f}</td>', row)
    assert f"Similarity of the nearest member: {held.top_score:.3f}" in row
    assert held.top_group.name in row


def test_the_queue_keeps_the_filters_on_the_next_page_link(client, curator, many_items):
    client.force_login(curator)
    page = client.get("/review/queue/?taxonomy=jobs&group=15-1252&blind=1").content.decode()
    rows = re.findall(r'data-testid="queue-row" data-item-id="(\d+)"', page)
    assert len(rows) == 30
    assert 'class="num score"' not in page
    assert 'rel="next"' not in page
    page = client.get("/review/queue/?taxonomy=jobs").content.decode()
    assert re.search(
        r'href="/review/queue/\?taxonomy=jobs&amp;after=[0-9.e-]+:\d+" rel="next"', page
    )


@pytest.mark.parametrize("after", ["x", "1.5", "nan:3", "1.5:x", "1.5:-2"])
def test_a_bad_queue_cursor_is_a_400_naming_it(client, curator, items, after):
    client.force_login(curator)
    response = client.get("/review/queue/", {"after": after})
    assert response.status_code == 400
    assert "after: expected &lt;priority&gt;:&lt;id&gt;" in response.content.decode()


def test_bad_queue_filters_are_a_400_naming_the_field(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/queue/?status=finished")
    assert response.status_code == 400
    assert "status: Select a valid choice" in response.content.decode()


# --- bounded queries ------------------------------------------------------------------------


def test_the_card_page_costs_the_same_few_queries_with_sixty_items(
    client, curator, many_items, django_assert_max_num_queries
):
    for item in many_items[-10:]:
        judgement_create(review_item=item, user=curator, verdict="skip")
    client.force_login(curator)
    # One for whether the verdicts changed (probability); four to rank the card live (its
    # verdicts, the live pointers, the members the answer names).
    with django_assert_max_num_queries(21):
        response = client.get("/review/")
    assert response.status_code == 200
    shown = card_item_id(response.content.decode())
    # The next card ranked live too, and stored: the verdict just made changes its answer.
    with django_assert_max_num_queries(39):
        response = client.post(f"/review/items/{shown}/judge", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 200


def test_the_queue_page_costs_the_same_few_queries_with_sixty_items(
    client, curator, other_curator, many_items, django_assert_max_num_queries
):
    for _ in range(3):
        review_item_claim(user=other_curator)
        review_item_claim(user=curator)
    client.force_login(curator)
    # Four of them rank the page's open items live: their verdicts, the taxonomy, the live
    # pointers and the members the answers name; none a row.
    with django_assert_max_num_queries(10):
        response = client.get("/review/queue/")
    assert response.status_code == 200
    assert response.content.decode().count('data-testid="queue-row"') == 50


def test_answers_a_new_model_changed_go_first_marked_as_such(client, curator, tiny_taxonomy):
    """After a promotion every open item is predicted again; those whose answer changed and
    nobody judged come first in the queue and on the card, which says what it was."""
    from annotations.services.review.inputs import review_items_repredict

    changed, baristas = answer_changed_by_a_new_model(tiny_taxonomy)

    assert review_items_repredict(taxonomy=tiny_taxonomy) == 3
    changed.refresh_from_db()
    assert changed.changed_from == baristas and changed.top_group != baristas
    client.force_login(curator)
    queue = client.get("/review/queue/").content.decode()
    rows = re.findall(r'data-testid="queue-row" data-item-id="(\d+)"', queue)
    assert rows[0] == str(changed.id)
    assert queue.count('data-testid="changed-badge"') == 1
    card = client.get("/review/").content.decode()
    assert card_item_id(card) == changed.id
    assert "answer changed by jobs/v1: it was Baristas" in card
