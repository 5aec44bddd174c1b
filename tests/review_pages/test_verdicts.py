"""Verdicts on the review card: stored once, the next card back, refused with the reason (and
nothing stored) when they cannot be taken; the group search; who may judge."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.models import Group, Judgement, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.verdicts import judgement_create
from tests.review_pages.conftest import HTMX, card_item_id, head


def test_an_htmx_verdict_is_stored_and_the_next_card_comes_back(client, curator, items):
    client.force_login(curator)
    first = head()
    client.get("/review/")
    response = client.post(f"/review/items/{first.id}/judge", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 200
    assert b"<html" not in response.content  # just the panel
    judgement = Judgement.objects.get()
    assert (judgement.review_item_id, judgement.verdict, judgement.user) == (
        first.id,
        "confirm",
        curator,
    )
    remaining = ReviewItem.objects.exclude(id=first.id).get()
    page = response.content.decode()
    assert card_item_id(page) == remaining.id
    # The counter comes in its own request, so the next card needn't wait for the count.
    assert 'hx-get="/review/progress/" hx-trigger="load"' in page
    progress = client.get("/review/progress/", **HTMX)
    assert progress.status_code == 200
    assert "1 open · 1 done · 1 yours today" in progress.content.decode()


def test_the_progress_counts_within_the_filters_and_only_live_verdicts_of_today(
    client, curator, other_curator, items
):
    nurse = ReviewItem.objects.get(input__text="icu staff nurse")
    judgement_create(review_item=nurse, user=other_curator, verdict="confirm")
    barista = ReviewItem.objects.get(input__text="Java Barista")
    judgement_create(review_item=barista, user=curator, verdict="skip")
    undone = judgement_create(review_item=barista, user=curator, verdict="none")
    client.force_login(curator)
    client.post(f"/review/judgements/{undone.id}/undo", **HTMX)
    page = client.get("/review/progress/?taxonomy=jobs&group=29-1141").content.decode()
    assert "0 open · 1 done · 0 yours today" in page
    page = client.get("/review/progress/").content.decode()
    assert "0 open · 1 done · 0 yours today" in page  # a skip puts nothing anywhere
    response = client.get("/review/progress/?score_min=x")
    assert response.status_code == 400
    assert "score_min: Enter a number." in response.content.decode()


def test_yours_today_counts_inputs_put_somewhere_not_each_step(client, curator, items):
    """A false match and the group picked after it are one input judged."""
    barista, nurse = items
    accountants = Group.objects.get(taxonomy=barista.taxonomy, code="13-2011")
    judgement_create(review_item=barista, user=curator, verdict="false_match",
                     group=barista.top_group)  # fmt: skip
    client.force_login(curator)
    assert "0 yours today" in client.get("/review/progress/").content.decode()
    barista.refresh_from_db()
    judgement_create(review_item=barista, user=curator, verdict="reassign", group=accountants)
    judgement_create(review_item=nurse, user=curator, verdict="confirm")
    assert "0 open · 2 done · 2 yours today" in client.get("/review/progress/").content.decode()


def test_a_double_submitted_verdict_is_stored_once(client, curator, items):
    client.force_login(curator)
    first = head()
    data = {"verdict": "confirm", "idempotency_key": "card-1", "prediction_id": first.prediction_id}
    assert client.post(f"/review/items/{first.id}/judge", data, **HTMX).status_code == 200
    assert client.post(f"/review/items/{first.id}/judge", data, **HTMX).status_code == 200
    assert Judgement.objects.count() == 1


def card_key(page: str) -> str:
    return re.search(r'name="idempotency_key" value="(\w+)"', page).group(1)


def test_another_verdict_from_a_card_already_judged_says_what_was_stored_and_how_to_change_it(
    client, curator, items
):
    """A card kept by the browser, judged again with another key press: the key pressed is not
    the request's idempotency key, so the card names the verdict stored, not "this key"."""
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    item = ReviewItem.objects.get(id=card_item_id(page))
    url = f"/review/items/{item.id}/judge"
    data = {"idempotency_key": card_key(page), "prediction_id": item.prediction_id}
    assert client.post(url, {**data, "verdict": "confirm"}, **HTMX).status_code == 200
    response = client.post(url, {**data, "verdict": "none"}, **HTMX)
    assert response.status_code == 409
    error = re.search(r'data-testid="error">([^<]*)<', response.content.decode()).group(1)
    assert error == (
        f"Not stored: you already judged “{item.input.text}” (Confirm → {item.top_group.name}). "
        "To change that, undo it in your last verdicts (u if it is the latest) and judge the "
        "card again."
    )
    assert [(j.review_item_id, j.verdict) for j in Judgement.objects.all()] == [
        (item.id, "confirm")
    ]


def test_another_verdict_from_a_card_whose_verdict_was_undone_says_to_reload(
    client, curator, items
):
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    item = ReviewItem.objects.get(id=card_item_id(page))
    url = f"/review/items/{item.id}/judge"
    data = {"idempotency_key": card_key(page), "prediction_id": item.prediction_id}
    client.post(url, {**data, "verdict": "confirm"}, **HTMX)
    client.post(f"/review/judgements/{Judgement.objects.get().id}/undo", **HTMX)
    response = client.post(url, {**data, "verdict": "none"}, **HTMX)
    assert response.status_code == 409
    assert "was judged from this card (Confirm → " in response.content.decode()
    assert "undone since. Reload the page to judge it again." in response.content.decode()
    assert not Judgement.objects.live().exists()


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
    first = items[0]
    response = client.post(f"/review/items/{first.id}/judge", data, **HTMX)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Judgement.objects.exists()
    first.refresh_from_db()
    assert first.status == ReviewItem.Status.PENDING


def test_a_refused_verdict_keeps_the_curator_on_the_same_card(client, curator, items):
    client.force_login(curator)
    shown = card_item_id(client.get("/review/").content.decode())
    item = ReviewItem.objects.get(id=shown)
    rejected = item.prediction.ranked_groups[0]["code"]
    client.post(f"/review/items/{shown}/judge", {"verdict": "false_match"}, **HTMX)
    response = client.post(
        f"/review/items/{shown}/judge", {"verdict": "reassign", "group_code": rejected}, **HTMX
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "was rejected for this input" in page
    assert card_item_id(page) == shown
    assert Judgement.objects.get().verdict == "false_match"


def test_a_verdict_on_an_item_another_curator_holds_is_a_409(client, curator, other_curator, items):
    held = review_item_claim(user=other_curator)
    client.force_login(curator)
    response = client.post(f"/review/items/{held.id}/judge", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 409
    page = response.content.decode()
    assert "another curator is reviewing this item" in page
    assert card_item_id(page) != held.id  # the curator gets a card of their own meanwhile
    assert not Judgement.objects.exists()


def test_group_search_finds_groups_by_name_words(client, curator, items):
    client.force_login(curator)
    response = client.get(f"/review/items/{items[0].id}/groups", {"q": "truck driv"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Heavy Truck Drivers" in page
    assert "Baristas" not in page
    assert "data-result" in page


def test_group_search_results_keep_the_filters(client, curator, items):
    client.force_login(curator)
    response = client.get(
        f"/review/items/{items[0].id}/groups", {"q": "nurse", "taxonomy": "jobs", "blind": "1"}
    )
    assert response.status_code == 200
    assert (
        f"/review/items/{items[0].id}/judge?taxonomy=jobs&amp;blind=1" in response.content.decode()
    )


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
    for url in ["/review/", "/review/queue/", "/review/batch/jobs/", "/review/batch/jobs/15-1252/"]:
        assert client.get(url).status_code == 403, url
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "skip"})
    assert response.status_code == 403
    assert not Judgement.objects.exists()


def test_an_anonymous_verdict_is_refused_and_stores_nothing(client, items):
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "confirm"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert not Judgement.objects.exists()


def test_a_verdict_without_the_csrf_token_is_refused(curator, items):
    client = Client(enforce_csrf_checks=True)
    client.force_login(curator)
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "skip"})
    assert response.status_code == 403
    assert not Judgement.objects.exists()


def test_a_verdict_on_a_stale_card_is_a_409_and_shows_the_current_one(
    client, curator, tiny_taxonomy, items
):
    client.force_login(curator)
    shown = card_item_id(client.get("/review/").content.decode())
    item = ReviewItem.objects.get(id=shown)
    shown_prediction = item.prediction_id
    inputs_submit(taxonomy=tiny_taxonomy, texts=[item.input.text], source="api")
    response = client.post(
        f"/review/items/{shown}/judge",
        {"verdict": "confirm", "prediction_id": shown_prediction},
        **HTMX,
    )
    assert response.status_code == 409
    page = response.content.decode()
    assert "prediction changed" in page
    assert card_item_id(page) == shown
    item.refresh_from_db()
    assert f'name="prediction_id" value="{item.prediction_id}"' in page
    assert item.prediction_id != shown_prediction
    assert not Judgement.objects.exists()


def test_control_characters_in_the_group_search_are_ignored(client, curator, items):
    client.force_login(curator)
    response = client.get(f"/review/items/{items[0].id}/groups", {"q": "nur\x00se"})
    assert response.status_code == 200
    assert "Registered Nurses" in response.content.decode()


def test_after_a_false_match_the_card_offers_only_the_other_groups(client, curator, items):
    client.force_login(curator)
    first = head()
    rejected = first.prediction.ranked_groups[0]
    client.post(
        f"/review/items/{first.id}/judge",
        {"verdict": "false_match", "group_code": rejected["code"]},
        **HTMX,
    )
    page = client.get("/review/").content.decode()
    assert card_item_id(page) == first.id  # half done: it comes first
    assert "false match: pick the right group" in page
    assert f'value="{rejected["code"]}"' not in page
    assert 'data-testid="confirm"' not in page


def test_a_second_curator_sees_every_group_the_first_one_rejected(
    client, settings, tiny_taxonomy, curator, other_curator
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement_create(review_item=item, user=other_curator, verdict="none")
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    assert card_item_id(page) == item.id
    assert page.count('data-testid="group-option"') == len(item.prediction.ranked_groups)
    assert 'data-testid="confirm"' in page


def found(client, item_id: int, query: str) -> list[tuple[str, str]]:
    """(group name, why it was found) of each type-ahead result, in order."""
    page = client.get(f"/review/items/{item_id}/groups", {"q": query}).content.decode()
    results = re.findall(
        r'<span class="name">([^<]+)</span>(?: <span class="why muted" data-testid="found-by">'
        r"([^<]+)</span>)?",
        page,
    )
    return [(name, why or "name") for name, why in results]


def test_reassign_search_finds_a_group_by_its_members_titles(client, curator, items):
    """ "python" names no group, but Software Developers has the member "Python Developer"; a
    piece of another word ("ist" in "Barista") finds nothing by members."""
    client.force_login(curator)
    results = found(client, items[0].id, "python")
    assert results[0] == ("Software Developers", "has “Python Developer”")
    assert all(
        why != "has “Espresso Bar Attendant”" for _, why in found(client, items[0].id, "ist")
    )


def test_reassign_search_offers_the_encoders_nearest_group_for_a_misspelt_title(
    client, curator, tiny_taxonomy
):
    """A misspelt title names no group and no member: the live encoder's nearest group for the
    query is offered, marked as similar, from the first search (no ranker fitted yet)."""
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Lorry Driver"], source="api")
    client.force_login(curator)
    results = found(client, item.id, "acountant")
    assert results and results[0] == ("Accountants", "similar")
