from __future__ import annotations

import pytest

from annotations.models import Judgement, Member, ReviewItem
from annotations.services.review import inputs_submit


@pytest.fixture
def items(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Barista", "icu staff nurse"], source="api"
    )


def test_the_review_page_requires_login(client, items):
    response = client.get("/review/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/review/"


def test_the_review_page_shows_the_next_input_with_its_groups_and_evidence(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/")
    assert response.status_code == 200
    head = ReviewItem.objects.order_by("-priority", "id").first()
    page = response.content.decode()
    assert head.input.text in page
    for ranked in head.prediction.ranked_groups:
        assert ranked["name"] in page
        assert f"matched “{ranked['member']}”" in page
    assert "2 open · 0 done" in page


def test_an_htmx_verdict_is_stored_and_the_next_card_comes_back(client, curator, items):
    client.force_login(curator)
    head = ReviewItem.objects.order_by("-priority", "id").first()
    response = client.post(
        f"/review/items/{head.id}/judge", {"verdict": "confirm"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert b"<html" not in response.content  # just the panel
    judgement = Judgement.objects.get()
    assert (judgement.review_item_id, judgement.verdict, judgement.user) == (
        head.id,
        "confirm",
        curator,
    )
    remaining = ReviewItem.objects.exclude(id=head.id).get()
    assert remaining.input.text in response.content.decode()
    assert "1 open · 1 done" in response.content.decode()


def test_a_plain_form_post_redirects_back_to_the_queue(client, curator, items):
    client.force_login(curator)
    head = ReviewItem.objects.order_by("-priority", "id").first()
    response = client.post(
        f"/review/items/{head.id}/judge", {"verdict": "reassign", "group_code": "35-3023"}
    )
    assert response.status_code == 302
    assert Member.objects.get(source="curator").group.code == "35-3023"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"verdict": "reassign", "group_code": "99-9999"}, "no group &#x27;99-9999&#x27;"),
        ({"verdict": "reassign"}, "reassign needs the group"),
        ({"verdict": "obliterate"}, "Select a valid choice"),
    ],
)
def test_a_bad_verdict_is_a_400_with_the_reason_and_stores_nothing(
    client, curator, items, data, message
):
    client.force_login(curator)
    head = items[0]
    response = client.post(f"/review/items/{head.id}/judge", data, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Judgement.objects.exists()
    head.refresh_from_db()
    assert head.status == ReviewItem.Status.PENDING


def test_group_search_finds_groups_by_name_words(client, curator, items):
    client.force_login(curator)
    response = client.get(f"/review/items/{items[0].id}/groups", {"q": "truck driv"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Heavy Truck Drivers" in page
    assert "Baristas" not in page


def test_judging_an_unknown_item_is_a_404(client, curator, items):
    client.force_login(curator)
    assert client.post("/review/items/999999/judge", {"verdict": "skip"}).status_code == 404


def test_the_health_check_needs_no_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_only_curators_and_admins_may_review(client, user_model, items):
    outsider = user_model.objects.create_user("otto", password="otto-pass-123")
    client.force_login(outsider)
    assert client.get("/review/").status_code == 403
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "skip"})
    assert response.status_code == 403
    assert not Judgement.objects.exists()


def test_an_anonymous_verdict_is_refused_and_stores_nothing(client, items):
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "confirm"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert not Judgement.objects.exists()


def test_a_verdict_without_the_csrf_token_is_refused(curator, items):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(curator)
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "skip"})
    assert response.status_code == 403
    assert not Judgement.objects.exists()


def test_a_verdict_on_a_stale_card_is_a_409_and_shows_the_current_one(
    client, curator, tiny_taxonomy, items
):
    client.force_login(curator)
    head = items[0]
    shown = head.prediction_id
    inputs_submit(taxonomy=tiny_taxonomy, texts=[head.input.text], source="api")
    response = client.post(
        f"/review/items/{head.id}/judge",
        {"verdict": "confirm", "prediction_id": shown},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 409
    assert "prediction changed" in response.content.decode()
    assert not Judgement.objects.exists()


def test_control_characters_in_the_group_search_are_ignored(client, curator, items):
    client.force_login(curator)
    response = client.get(f"/review/items/{items[0].id}/groups", {"q": "nur\x00se"})
    assert response.status_code == 200
    assert "Registered Nurses" in response.content.decode()


def test_after_a_false_match_the_card_offers_only_the_other_groups(client, curator, items):
    client.force_login(curator)
    head = ReviewItem.objects.order_by("-priority", "id").first()
    rejected = head.prediction.ranked_groups[0]
    client.post(
        f"/review/items/{head.id}/judge",
        {"verdict": "false_match", "group_code": rejected["code"]},
        HTTP_HX_REQUEST="true",
    )
    page = client.get("/review/").content.decode()
    assert "false match: pick the right group" in page
    assert f'value="{rejected["code"]}"' not in page
    assert 'data-testid="confirm"' not in page
