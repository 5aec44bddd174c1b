"""Any verdict can be found (the queue's Done filter, the input's page with its history) and
changed: taken back and judged again, audited, the new verdict training like any other."""

from __future__ import annotations

import re

from annotations.models import AuditEvent, FeedbackPair, Group, Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.training.retraining import new_verdict_count
from tests.review_pages.conftest import card_item_id, login


def judged(taxonomy, user, text="Java Barista"):
    (item,) = inputs_submit(taxonomy=taxonomy, texts=[text], source="api")
    judgement_create(review_item=item, user=user, verdict="confirm")
    item.refresh_from_db()
    return item


def test_the_queues_done_filter_finds_judged_items_and_links_their_page(curator, tiny_taxonomy):
    item = judged(tiny_taxonomy, curator)
    inputs_submit(taxonomy=tiny_taxonomy, texts=["icu nurse"], source="api")
    client = login(curator)
    page = client.get("/review/queue/", {"status": "done"}).content.decode()
    rows = re.findall(r'data-testid="queue-row" data-item-id="(\d+)"', page)
    assert rows == [str(item.id)]
    assert f'href="/inputs/{item.input_id}/" data-testid="input-link">Java Barista<' in page
    assert "Done (judged)" in page
    # The card never takes a judged item: its filters have no Done.
    card = client.get("/review/", {"status": "done"}).content.decode()
    assert "status: Select a valid choice" in card and 'data-testid="review-card"' not in card


def test_an_inputs_page_shows_every_verdict_and_the_author_changes_the_latest(
    curator, tiny_taxonomy
):
    item = judged(tiny_taxonomy, curator)
    first = Judgement.objects.get()
    pairs_before = set(FeedbackPair.objects.values_list("id", flat=True))
    client = login(curator)
    page = client.get(f"/inputs/{item.input_id}/").content.decode()
    assert 'data-testid="verdict-row"' in page and 'data-testid="reopen"' in page

    response = client.post(f"/inputs/{item.input_id}/reopen", {"judgement": first.id})
    assert response.status_code == 302 and response["Location"] == "/review/"
    card = client.get("/review/").content.decode()
    assert card_item_id(card) == item.id
    assert "The verdict on “Java Barista” is taken back: judge it again." in card
    accountants = Group.objects.get(taxonomy=tiny_taxonomy, code="13-2011")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=accountants)

    page = client.get(f"/inputs/{item.input_id}/").content.decode()
    assert len(re.findall('data-testid="verdict-row"', page)) == 2
    assert 'data-testid="undone"' in page
    # The old verdict's pairs are gone, the new verdict's are new: it trains as a new one.
    assert not pairs_before & set(FeedbackPair.objects.values_list("id", flat=True))
    assert new_verdict_count(tiny_taxonomy, after=max(pairs_before)) == 1
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True))[-2:] == [
        "judgement.undo",
        "judgement.create",
    ]


def test_judging_again_shows_that_card_though_another_was_held(curator, tiny_taxonomy):
    """The curator held another card when they changed a verdict from the input's page: the
    review page showed the held one under the banner naming the reopened input."""
    item = judged(tiny_taxonomy, curator)
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Sr. Java Developer", "icu nurse"], source="api")
    client = login(curator)
    held = card_item_id(client.get("/review/").content.decode())
    assert held != item.id
    # The held card ranks first in the queue, as a card worth more asking does.
    ReviewItem.objects.filter(id=held).update(priority=1_000_000.0)

    client.post(f"/inputs/{item.input_id}/reopen", {"judgement": Judgement.objects.get().id})
    card = client.get("/review/").content.decode()
    assert card_item_id(card) == item.id
    assert "The verdict on “Java Barista” is taken back: judge it again." in card
    # Judged, the card held before comes back next.
    judgement_create(review_item=item, user=curator, verdict="confirm")
    assert card_item_id(client.get("/review/").content.decode()) == held


def test_another_curator_cannot_change_it_and_sees_whose_it_is(
    curator, other_curator, tiny_taxonomy
):
    item = judged(tiny_taxonomy, curator)
    client = login(other_curator)
    page = client.get(f"/inputs/{item.input_id}/").content.decode()
    assert 'data-testid="reopen"' not in page
    assert "Only carla, who gave the latest verdict, or an admin can change it." in page
    response = client.post(
        f"/inputs/{item.input_id}/reopen", {"judgement": Judgement.objects.get().id}
    )
    assert response.status_code == 403
    assert Judgement.objects.get().undone_at is None


def test_changing_a_verdict_someone_changed_meanwhile_is_a_409_naming_them(
    curator, admin_user, tiny_taxonomy
):
    item = judged(tiny_taxonomy, curator)
    stale = Judgement.objects.get()
    assert (
        login(admin_user)
        .post(f"/inputs/{item.input_id}/reopen", {"judgement": stale.id})
        .status_code
        == 302
    )
    response = login(curator).post(f"/inputs/{item.input_id}/reopen", {"judgement": stale.id})
    assert response.status_code == 409
    assert re.search(
        r"this verdict was already undone by ada at \d{4}-\d\d-\d\d \d\d:\d\d",
        response.content.decode(),
    )


def test_a_bad_or_foreign_verdict_id_is_refused(curator, tiny_taxonomy):
    item = judged(tiny_taxonomy, curator)
    other = judged(tiny_taxonomy, curator, text="icu nurse")
    client = login(curator)
    assert client.post(f"/inputs/{item.input_id}/reopen", {"judgement": "x"}).status_code == 400
    foreign = Judgement.objects.get(review_item=other)
    assert (
        client.post(f"/inputs/{item.input_id}/reopen", {"judgement": foreign.id}).status_code == 404
    )
    assert client.get("/inputs/999999/").status_code == 404
