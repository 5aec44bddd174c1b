"""The last verdicts beside the card, and undoing one: the card comes back to judge again; only
one's own latest verdict on an item can be undone."""

from __future__ import annotations

import re

from annotations.models import Judgement, Member, ReviewItem
from annotations.selectors.history import recent_verdicts_and_skips
from annotations.services.review.verdicts import judgement_create
from tests.review_pages.conftest import HTMX, card_item_id


def test_the_last_ten_verdicts_are_listed_beside_the_card_each_undoable(
    client, curator, many_items
):
    for item in many_items[:12]:
        judgement_create(review_item=item, user=curator, verdict="none")
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    listed = [
        int(i) for i in re.findall(r'data-testid="recent-verdict" data-judgement-id="(\d+)"', page)
    ]
    latest = list(Judgement.objects.order_by("-created_at").values_list("id", flat=True)[:10])
    assert listed == latest
    assert page.count('data-testid="undo"') == 10
    assert page.count('data-shortcut="u"') == 1


def test_undo_brings_the_card_back_to_judge_again(client, curator, items):
    client.force_login(curator)
    first = card_item_id(client.get("/review/").content.decode())
    client.post(f"/review/items/{first}/judge", {"verdict": "confirm"}, **HTMX)
    judgement = Judgement.objects.get()
    response = client.post(f"/review/judgements/{judgement.id}/undo", **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    assert card_item_id(page) == first
    assert "Verdict undone" in page
    judgement.refresh_from_db()
    assert judgement.undone_at is not None
    item = ReviewItem.objects.get(id=first)
    assert (item.status, item.leased_by) == (ReviewItem.Status.PENDING, curator)
    assert not Member.objects.filter(source="curator").exists()
    # Judged again, the card the curator was on before the undo comes next.
    response = client.post(f"/review/items/{first}/judge", {"verdict": "skip"}, **HTMX)
    assert card_item_id(response.content.decode()) != first


def test_undo_of_someone_elses_verdict_is_a_403(client, curator, other_curator, items):
    judgement = judgement_create(review_item=items[0], user=other_curator, verdict="confirm")
    client.force_login(curator)
    response = client.post(f"/review/judgements/{judgement.id}/undo", **HTMX)
    assert response.status_code == 403
    assert "only its curator or an admin can undo" in response.content.decode()
    judgement.refresh_from_db()
    assert judgement.undone_at is None


def test_undo_of_a_verdict_that_is_not_the_latest_on_its_item_is_a_409(client, curator, items):
    item = items[0]
    false_match = judgement_create(review_item=item, user=curator, verdict="false_match")
    reassign = judgement_create(
        review_item=item,
        user=curator,
        verdict="reassign",
        group=item.taxonomy.groups.get(code="53-3032"),
    )
    client.force_login(curator)
    response = client.post(f"/review/judgements/{false_match.id}/undo", **HTMX)
    assert response.status_code == 409
    assert "a later verdict on this item must be undone first" in response.content.decode()
    assert Judgement.objects.live().count() == 2
    assert reassign.id in [j.id for j in Judgement.objects.live()]


def test_undo_of_an_unknown_verdict_is_a_404(client, curator, items):
    client.force_login(curator)
    assert client.post("/review/judgements/999999/undo", **HTMX).status_code == 404


def test_undo_needs_a_post(client, curator, items):
    judgement = judgement_create(review_item=items[0], user=curator, verdict="skip")
    client.force_login(curator)
    assert client.get(f"/review/judgements/{judgement.id}/undo").status_code == 405
    judgement.refresh_from_db()
    assert judgement.undone_at is None


def test_a_skip_older_than_the_last_verdicts_still_stands_beside_them(curator, many_items):
    """Each kind is read apart: a skip before thirty-odd verdicts is still listed, and an
    undone verdict is not."""
    skipped = judgement_create(review_item=many_items[0], user=curator, verdict="skip")
    for item in many_items[1:36]:
        judgement_create(review_item=item, user=curator, verdict="none")
    undone = judgement_create(review_item=many_items[36], user=curator, verdict="none")
    Judgement.objects.filter(id=undone.id).update(undone_at=undone.created_at)
    lines, skips = recent_verdicts_and_skips(user=curator)
    assert [j.id for j in skips] == [skipped.id]
    newest = Judgement.objects.live().exclude(verdict="skip").order_by("-created_at", "-id")
    assert [line.judgement.id for line in lines] == list(newest.values_list("id", flat=True)[:10])
    assert undone.id not in [line.judgement.id for line in lines]
