"""The API for verdicts: recording one (idempotently), undoing it, listing verdicts and the
feedback pairs they yield."""

from __future__ import annotations

import re

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import FeedbackPair, Group, Judgement, Member, ReviewItem, Taxonomy
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim, review_item_release
from annotations.services.review.verdicts import judgement_create

API = "/api/v1"
URL = f"{API}/judgements"


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


@pytest.fixture
def item(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    return item


@pytest.fixture
def barista(tiny_taxonomy) -> ReviewItem:
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    return item


def recorded() -> tuple:
    """What a verdict stores, to show a refused or replayed request stored nothing more."""
    return (
        Judgement.objects.count(),
        FeedbackPair.objects.count(),
        Member.objects.filter(source="curator").count(),
    )


# --- recording a verdict --------------------------------------------------------------------


def test_a_confirm_is_stored_with_its_pair_and_member(api_client, item):
    response = api_client.post(
        URL,
        {"review_item": item.id, "verdict": "confirm", "prediction": item.prediction_id},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["verdict"], body["user"], body["review_item"]) == ("confirm", "carla", item.id)
    assert body["group"]["code"] == "15-1252"
    assert body["undone_at"] is None
    judgement = Judgement.objects.get()
    assert (judgement.id, judgement.user.username, judgement.group.code) == (
        body["id"],
        "carla",
        "15-1252",
    )
    assert list(FeedbackPair.objects.values_list("text_a", "label", "origin")) == [
        ("Senior Java Engineer", True, "confirm")
    ]
    assert Member.objects.get(source="curator").text == "Senior Java Engineer"
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.DONE


def test_a_reassign_names_the_right_group_and_rejects_the_predicted_one(api_client, item):
    accountants = group("13-2011")
    response = api_client.post(
        URL, {"review_item": item.id, "verdict": "reassign", "group": accountants.id}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["group"] == {"id": accountants.id, "code": "13-2011", "name": "Accountants"}
    assert body["rejected_group"]["code"] == "15-1252"
    assert sorted(FeedbackPair.objects.values_list("origin", "label")) == [
        ("reassign", True),
        ("reassign_negative", False),
    ]


def test_a_false_match_leaves_the_item_waiting_for_the_right_group(api_client, barista):
    response = api_client.post(
        URL, {"review_item": barista.id, "verdict": "false_match", "group": None}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["rejected_group"]["id"] == barista.top_group_id
    barista.refresh_from_db()
    assert barista.status == ReviewItem.Status.AWAITING_GROUP


def test_after_a_false_match_the_item_names_the_next_group_and_a_bare_confirm_takes_it(
    api_client, barista
):
    """The rejected group is never named as the item's answer again: the API's top group
    moves to the next group the card offers, and confirm without a group confirms that one
    (it used to name the rejected group and refuse the confirm with a 400)."""
    rejected = barista.top_group
    offered = [g["group_id"] for g in barista.prediction.ranked_groups]
    assert (
        api_client.post(
            URL, {"review_item": barista.id, "verdict": "false_match"}, format="json"
        ).status_code
        == 201
    )
    shown = api_client.get(f"{API}/review-items/{barista.id}").json()
    assert shown["top_group"]["id"] == offered[1] != rejected.id
    response = api_client.post(
        URL, {"review_item": barista.id, "verdict": "confirm"}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["group"]["id"] == offered[1]


def test_the_same_skip_sent_again_without_a_key_is_recorded_once(api_client, item, curator):
    """20 concurrent skips of one item by one curator once stored 20 verdicts."""
    first = api_client.post(URL, {"review_item": item.id, "verdict": "skip"}, format="json")
    again = api_client.post(URL, {"review_item": item.id, "verdict": "skip"}, format="json")
    assert (first.status_code, again.status_code) == (201, 409)
    assert again.json() == {"review_item": ["you skipped this item already"]}
    assert Judgement.objects.filter(verdict="skip").count() == 1
    # On a later pass the card leases it again, and it may be skipped again.
    from annotations.services.review.leases import review_item_claim

    assert review_item_claim(user=curator).id == item.id
    assert (
        api_client.post(URL, {"review_item": item.id, "verdict": "skip"}, format="json").status_code
        == 201
    )


def test_a_fractional_id_is_refused_not_truncated(api_client, item, barista):
    """{"review_item": 3116.9, "group": 442.7} once reassigned item 3116 to group 442; 7.0 is
    not an id either (siamweb.ids)."""
    accountants = Group.objects.get(taxonomy__slug="jobs", code="13-2011")
    for body in (
        {"review_item": item.id + 0.9, "verdict": "confirm"},
        {"review_item": item.id, "verdict": "reassign", "group": accountants.id + 0.7},
        {"review_item": float(item.id), "verdict": "confirm"},
    ):
        response = api_client.post(URL, body, format="json")
        assert response.status_code == 400
        (field,) = response.json()
        assert response.json()[field][0].startswith("A valid integer is required")
    assert not Judgement.objects.exists()
    whole = api_client.post(URL, {"review_item": item.id, "verdict": "confirm"}, format="json")
    assert whole.status_code == 201


def test_after_none_of_these_the_item_names_no_group_until_it_is_undone(api_client, barista):
    top = barista.top_group_id
    response = api_client.post(URL, {"review_item": barista.id, "verdict": "none"}, format="json")
    assert response.status_code == 201
    assert api_client.get(f"{API}/review-items/{barista.id}").json()["top_group"] is None
    undone = api_client.post(f"{URL}/{response.json()['id']}/undo", format="json")
    assert undone.status_code == 200, undone.json()
    assert api_client.get(f"{API}/review-items/{barista.id}").json()["top_group"]["id"] == top


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"verdict": "confirm"}, "review_item", "This field is required."),
        ({"review_item": 999999, "verdict": "confirm"}, "review_item", "does not exist"),
        ({"review_item": "one", "verdict": "confirm"}, "review_item", "A valid integer"),
        ({"review_item": True, "verdict": "confirm"}, "review_item", "A valid integer"),
        ({"review_item": "{item}"}, "verdict", "This field is required."),
        ({"review_item": "{item}", "verdict": "maybe"}, "verdict", "is not a valid choice"),
        ({"review_item": "{item}", "verdict": "reassign"}, "group", "reassign needs the group"),
        ({"review_item": "{item}", "verdict": "confirm", "group": 999999}, "group", "not exist"),
        ({"review_item": "{item}", "verdict": "confirm", "group": "{other}"}, "group", "is not in"),
        ({"review_item": "{item}", "verdict": "confirm", "prediction": "x"}, "prediction", "valid"),
    ],
)
def test_a_bad_verdict_is_a_400_naming_the_field_and_stores_nothing(
    api_client, item, body, field, message
):
    other = Taxonomy.objects.create(slug="skills", name="Skills")
    ids = {"item": item.id, "other": Group.objects.create(taxonomy=other, code="S", name="S").id}
    body = {
        key: int(value.format(**ids)) if isinstance(value, str) and value.startswith("{") else value
        for key, value in body.items()
    }
    response = api_client.post(URL, body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert message in response.json()[field][0]
    assert recorded() == (0, 0, 0)


def test_a_verdict_on_an_old_prediction_is_a_409(api_client, item, tiny_taxonomy):
    stale = item.prediction_id
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Engineer"], source="api")
    response = api_client.post(
        URL, {"review_item": item.id, "verdict": "confirm", "prediction": stale}, format="json"
    )
    assert response.status_code == 409
    assert list(response.json()) == ["prediction"]
    assert recorded() == (0, 0, 0)


def test_a_verdict_on_an_item_another_curator_holds_is_a_409(api_client, item, other_curator):
    review_item_claim(user=other_curator)
    response = api_client.post(URL, {"review_item": item.id, "verdict": "confirm"}, format="json")
    assert response.status_code == 409
    assert response.json() == {"review_item": ["another curator is reviewing this item right now"]}
    assert recorded() == (0, 0, 0)


def test_a_second_verdict_on_a_done_item_is_a_409(api_client, item, other_curator):
    judgement_create(review_item=item, user=other_curator, verdict="confirm")
    before = recorded()
    response = api_client.post(URL, {"review_item": item.id, "verdict": "confirm"}, format="json")
    assert response.status_code == 409
    assert response.json() == {"review_item": ["this item has already been judged"]}
    assert recorded() == before


def test_verdicts_need_a_curator(item, user_model):
    body = {"review_item": item.id, "verdict": "confirm"}
    assert APIClient().post(URL, body, format="json").status_code == 401
    stranger = client_for(user_model.objects.create_user(username="sam", password="x-pass-123"))
    assert stranger.post(URL, body, format="json").status_code == 403
    assert recorded() == (0, 0, 0)


# --- idempotency ----------------------------------------------------------------------------


def test_a_retry_with_the_same_key_answers_the_first_verdict_and_records_nothing(api_client, item):
    body = {"review_item": item.id, "verdict": "reassign", "group": group("13-2011").id}
    first = api_client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="verdict-1")
    assert first.status_code == 201
    after_first = recorded()
    assert after_first == (1, 2, 1)
    retry = api_client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="verdict-1")
    assert retry.status_code == 200
    assert retry.json() == first.json()
    assert recorded() == after_first
    assert Judgement.objects.get().idempotency_key == "verdict-1"


def test_the_same_key_with_another_body_is_a_409(api_client, item, barista):
    first = api_client.post(
        URL,
        {"review_item": item.id, "verdict": "confirm"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )
    assert first.status_code == 201
    before = recorded()
    for body in (
        {"review_item": item.id, "verdict": "false_match"},
        {"review_item": barista.id, "verdict": "confirm"},
    ):
        response = api_client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
        assert response.status_code == 409
        assert response.json() == {
            "Idempotency-Key": ["this key was already used for a different verdict"]
        }
    assert recorded() == before


def test_keys_belong_to_one_curator(api_client, other_curator, item, barista):
    mine = api_client.post(
        URL, {"review_item": item.id, "verdict": "confirm"}, format="json", HTTP_IDEMPOTENCY_KEY="k"
    )
    theirs = client_for(other_curator).post(
        URL,
        {"review_item": barista.id, "verdict": "confirm"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k",
    )
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert Judgement.objects.filter(idempotency_key="k").count() == 2


def test_an_over_long_key_is_a_400_naming_the_header(api_client, item):
    response = api_client.post(
        URL,
        {"review_item": item.id, "verdict": "confirm"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k" * 101,
    )
    assert response.status_code == 400
    assert response.json() == {"Idempotency-Key": ["at most 100 characters (got 101)"]}
    assert recorded() == (0, 0, 0)


def test_a_key_of_exactly_one_hundred_characters_is_fine(api_client, item):
    key = "k" * 100
    body = {"review_item": item.id, "verdict": "confirm"}
    assert api_client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=key).status_code == 201
    assert api_client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=key).status_code == 200
    assert recorded() == (1, 1, 1)


# --- undo -----------------------------------------------------------------------------------


def test_undo_takes_the_verdict_back_and_reopens_the_item(api_client, item):
    created = api_client.post(
        URL, {"review_item": item.id, "verdict": "confirm"}, format="json"
    ).json()
    response = api_client.post(f"{URL}/{created['id']}/undo")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["review_item_status"]) == (created["id"], "pending")
    assert body["undone_at"] is not None
    judgement = Judgement.objects.get()
    assert judgement.undone_at is not None
    assert (FeedbackPair.objects.count(), Member.objects.filter(source="curator").count()) == (0, 0)
    item.refresh_from_db()
    assert (item.status, item.leased_by.username) == ("pending", "carla")


def test_undoing_twice_is_a_409(api_client, item, curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    assert api_client.post(f"{URL}/{judgement.id}/undo").status_code == 200
    response = api_client.post(f"{URL}/{judgement.id}/undo")
    assert response.status_code == 409
    (message,) = response.json()["judgement"]
    assert re.fullmatch(r"this verdict was already undone by carla at \S+ \d\d:\d\d", message)


def test_a_curator_cannot_undo_someone_elses_verdict(api_client, item, other_curator):
    judgement = judgement_create(review_item=item, user=other_curator, verdict="confirm")
    response = api_client.post(f"{URL}/{judgement.id}/undo")
    assert response.status_code == 403  # not a conflict: no state makes it allowed
    assert list(response.json()) == ["judgement"]
    judgement.refresh_from_db()
    assert judgement.undone_at is None
    assert FeedbackPair.objects.count() == 1


def test_an_admin_can_undo_anyones_verdict(admin_user, item, curator):
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm")
    assert client_for(admin_user).post(f"{URL}/{judgement.id}/undo").status_code == 200
    judgement.refresh_from_db()
    assert judgement.undone_at is not None


def test_undoing_an_unknown_verdict_is_a_404(api_client, item):
    response = api_client.post(f"{URL}/999999/undo")
    assert response.status_code == 404
    assert response.json() == {"detail": "no judgement 999999"}


# --- listing verdicts and feedback pairs ----------------------------------------------------


@pytest.fixture
def history(item, barista, curator, other_curator):
    """Carla confirmed one item and took a false match on another back; Oscar rejected it."""
    judgement_create(review_item=item, user=curator, verdict="confirm")
    undone = judgement_create(review_item=barista, user=curator, verdict="false_match")
    client_for(curator).post(f"{URL}/{undone.id}/undo")
    review_item_release(item=barista, user=curator)
    judgement_create(review_item=barista, user=other_curator, verdict="false_match")
    return undone


def test_verdicts_are_listed_newest_first_live_ones_only(api_client, history):
    response = api_client.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"next", "previous", "results"}
    assert [(j["user"], j["verdict"]) for j in body["results"]] == [
        ("oscar", "false_match"),
        ("carla", "confirm"),
    ]


def test_undone_verdicts_are_listed_when_asked_for(api_client, history):
    body = api_client.get(URL, {"include_undone": "true", "user": "carla"}).json()
    assert [(j["verdict"], j["undone_at"] is not None) for j in body["results"]] == [
        ("false_match", True),
        ("confirm", False),
    ]


def test_verdicts_filter_by_item_and_verdict(api_client, history, barista):
    body = api_client.get(URL, {"review_item": barista.id, "verdict": "false_match"}).json()
    assert [j["user"] for j in body["results"]] == ["oscar"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"verdict": "maybe"}, "verdict"),
        ({"review_item": "first"}, "review_item"),
        ({"include_undone": "perhaps"}, "include_undone"),
    ],
)
def test_bad_verdict_filters_are_a_400_naming_the_field(api_client, history, params, field):
    response = api_client.get(URL, params)
    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_a_verdict_is_shown_by_id(api_client, history):
    response = api_client.get(f"{URL}/{history.id}")
    assert response.status_code == 200
    assert response.json()["undone_at"] is not None
    assert api_client.get(f"{URL}/999999").status_code == 404


def test_feedback_pairs_are_listed_and_filtered(api_client, history):
    everything = api_client.get(f"{API}/feedback-pairs")
    assert everything.status_code == 200
    pairs = everything.json()["results"]
    assert [(p["text_a"], p["label"], p["origin"]) for p in pairs] == [
        ("Java Barista", False, "false_match"),
        ("Senior Java Engineer", True, "confirm"),
    ]
    assert pairs[1]["group"]["code"] == "15-1252"
    positives = api_client.get(
        f"{API}/feedback-pairs", {"taxonomy": "jobs", "label": "true", "origin": "confirm"}
    ).json()["results"]
    assert [p["text_a"] for p in positives] == ["Senior Java Engineer"]
    negatives = api_client.get(f"{API}/feedback-pairs", {"label": "false"}).json()["results"]
    assert [p["text_a"] for p in negatives] == ["Java Barista"]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"taxonomy": "nope"}, "taxonomy"), ({"origin": "gut"}, "origin"), ({"label": "x"}, "label")],
)
def test_bad_feedback_filters_are_a_400_naming_the_field(api_client, history, params, field):
    response = api_client.get(f"{API}/feedback-pairs", params)
    assert response.status_code == 400
    assert list(response.json()) == [field]


@pytest.mark.parametrize("verdict", ["skip", "none"])
def test_a_group_with_a_verdict_that_takes_none_is_a_400_and_stores_nothing(
    api_client, item, verdict
):
    before = recorded()
    response = api_client.post(
        URL,
        {"review_item": item.id, "verdict": verdict, "group": group("35-3023").id},
        format="json",
    )
    assert response.status_code == 400
    assert f"{verdict} takes no group" in response.json()["group"][0]
    assert recorded() == before
    # Without a group the same verdict is taken.
    response = api_client.post(URL, {"review_item": item.id, "verdict": verdict}, format="json")
    assert response.status_code == 201
