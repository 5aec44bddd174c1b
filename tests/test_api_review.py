"""The API for inputs and the review queue: submitting texts, listing, claiming, releasing."""

from __future__ import annotations

import base64

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.api.base import CursorQueueOrder
from annotations.models import Group, Input, Prediction, ReviewItem, Taxonomy
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from siamweb.web.api import CursorNewestFirst

API = "/api/v1"
TEXTS = ["Senior Java Engineer", "icu nurse practitioner", "Java Barista", "cdl driver"]


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


@pytest.fixture
def items(tiny_taxonomy) -> list[ReviewItem]:
    return inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")


def queue_order() -> list[int]:
    return list(
        ReviewItem.objects.filter(status__in=ReviewItem.OPEN_STATUSES)
        .order_by("-priority", "id")
        .values_list("id", flat=True)
    )


# --- inputs ---------------------------------------------------------------------------------


def test_submitted_texts_become_review_items_with_their_predictions(api_client, tiny_taxonomy):
    response = api_client.post(
        f"{API}/taxonomies/jobs/inputs",
        {"texts": ["Senior Java Engineer", " senior java  ENGINEER", "night nurse"], "k": 2},
        format="json",
    )
    assert response.status_code == 201
    java, nurse = response.json()["results"]
    assert (java["text"], java["status"], java["taxonomy"]) == (
        "Senior Java Engineer",
        "pending",
        "jobs",
    )
    assert java["input"]["source"] == "api"
    assert java["prediction"]["model_version"]["label"] == "jobs/v1"
    ranked = java["prediction"]["ranked_groups"]
    assert len(ranked) == 2
    assert (ranked[0]["code"], ranked[0]["member"]) == ("15-1252", "Java Software Engineer")
    assert java["top_group"]["code"] == "15-1252"
    assert nurse["prediction"]["ranked_groups"][0]["code"] == "29-1141"
    assert ReviewItem.objects.count() == 2
    assert Input.objects.get(normalized_text="senior java engineer").source == "api"


def test_a_text_sent_again_counts_an_occurrence_and_keeps_its_item(api_client, items):
    java = items[0]
    response = api_client.post(
        f"{API}/taxonomies/jobs/inputs", {"texts": ["senior java engineer"]}, format="json"
    )
    assert response.status_code == 201
    (result,) = response.json()["results"]
    assert (result["id"], result["input"]["occurrences"]) == (java.id, 2)
    assert ReviewItem.objects.count() == len(TEXTS)
    assert Prediction.objects.filter(input=java.input).count() == 2


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "texts", "This field is required."),
        ({"texts": []}, "texts", "This list may not be empty."),
        ({"texts": "nurse"}, "texts", "Expected a list of items"),
        ({"texts": ["ok", "  "]}, "texts", "is empty"),
        ({"texts": ["nul\x00"]}, "texts", "control characters"),
        ({"texts": ["x" * 201]}, "texts", "longer than 200 characters"),
        # 28 characters whose compatibility forms spell out to 504, more than a row stores.
        ({"texts": ["\ufdfa" * 28]}, "texts", "once its compatibility characters are spelled"),
        ({"texts": [3]}, "texts", "must be a string"),
        ({"texts": ["nurse"], "k": 0}, "k", "greater than or equal to 1"),
        ({"texts": ["nurse"], "k": 51}, "k", "at most 50"),
        ({"texts": ["nurse"], "k": "five"}, "k", "A valid integer is required."),
    ],
)
def test_bad_inputs_are_a_400_naming_the_field_and_store_nothing(
    api_client, tiny_taxonomy, body, field, message
):
    response = api_client.post(f"{API}/taxonomies/jobs/inputs", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert message in str(response.json()[field])
    assert (Input.objects.count(), ReviewItem.objects.count()) == (0, 0)


def test_too_many_texts_at_once_are_refused(api_client, tiny_taxonomy, settings):
    settings.SIAMWEB_MAX_TEXTS_PER_REQUEST = 2
    response = api_client.post(
        f"{API}/taxonomies/jobs/inputs", {"texts": ["a b", "c d", "e f"]}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"texts": ["at most 2 texts per request"]}


def test_inputs_for_a_taxonomy_without_a_model_are_a_409(api_client):
    Taxonomy.objects.create(slug="bare", name="Bare")
    response = api_client.post(f"{API}/taxonomies/bare/inputs", {"texts": ["x"]}, format="json")
    assert response.status_code == 409
    (message,) = response.json()["taxonomy"]
    assert "manage.py train bare --activate" in message
    assert Input.objects.count() == 0


def test_inputs_are_listed_newest_first_with_a_cursor(api_client, items, monkeypatch):
    monkeypatch.setattr(CursorNewestFirst, "page_size", 3)
    first = api_client.get(f"{API}/taxonomies/jobs/inputs")
    assert first.status_code == 200
    body = first.json()
    assert set(body) == {"next", "previous", "results"}
    assert body["previous"] is None
    second = api_client.get(body["next"]).json()
    assert second["next"] is None
    texts = [i["text"] for i in body["results"] + second["results"]]
    assert texts == list(reversed(TEXTS))
    assert body["results"][0]["review_item"] == {
        "id": items[-1].id,
        "status": "pending",
        "auto_coded": False,
    }


# --- listing the queue ----------------------------------------------------------------------


def test_the_queue_lists_open_items_most_worth_a_look_first(api_client, items, curator):
    judgement_create(review_item=items[0], user=curator, verdict="confirm")
    response = api_client.get(f"{API}/review-items")
    assert response.status_code == 200
    listed = [item["id"] for item in response.json()["results"]]
    assert listed == queue_order()
    assert items[0].id not in listed
    priorities = [item["priority"] for item in response.json()["results"]]
    assert priorities == sorted(priorities, reverse=True)


def test_the_queue_pages_with_a_keyset_cursor(api_client, items, monkeypatch):
    monkeypatch.setattr(CursorQueueOrder, "page_size", 3)
    first = api_client.get(f"{API}/review-items").json()
    assert set(first) == {"next", "previous", "results"}
    assert len(first["results"]) == 3
    second = api_client.get(first["next"]).json()
    assert second["next"] is None
    assert second["previous"] is not None
    seen = [item["id"] for item in first["results"] + second["results"]]
    assert seen == queue_order()


def test_the_queue_filters_by_status_group_taxonomy_and_score(api_client, items, curator):
    judgement_create(review_item=items[0], user=curator, verdict="confirm")
    done = api_client.get(f"{API}/review-items", {"status": "done"}).json()["results"]
    assert [item["id"] for item in done] == [items[0].id]
    nurses = api_client.get(
        f"{API}/review-items", {"group": group("29-1141").id, "taxonomy": "jobs"}
    ).json()["results"]
    assert [item["text"] for item in nurses] == ["icu nurse practitioner"]
    low, high = sorted(item.top_score for item in items[1:])[:2]
    between = api_client.get(
        f"{API}/review-items", {"score_min": low, "score_max": high, "status": "open"}
    ).json()["results"]
    assert sorted(item["top_score"] for item in between) == [low, high]
    ReviewItem.objects.filter(id=items[1].id).update(bulk_job_id=7)
    sent = api_client.get(f"{API}/review-items", {"job": 7}).json()["results"]
    assert [item["id"] for item in sent] == [items[1].id]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "nope"}, "status"),
        ({"score_min": "high"}, "score_min"),
        ({"score_max": "low"}, "score_max"),
        ({"score_min": 0.9, "score_max": 0.1}, "score_min"),
        ({"group": 999999}, "group"),
        ({"group": "nurses"}, "group"),
        ({"group": "other", "taxonomy": "jobs"}, "group"),
        ({"taxonomy": "nope"}, "taxonomy"),
        ({"job": "seven"}, "job"),
        ({"job": 0}, "job"),
        # An id follows the one rule every id does (docs/api.md): not "9_0" read as 90, nor
        # 9.0, "+9", " 9 " or a full-width digit read as 9.
        ({"job": "9_0"}, "job"),
        ({"job": "9.0"}, "job"),
        ({"job": "+9"}, "job"),
        ({"job": " 9 "}, "job"),
        ({"job": "\uff19"}, "job"),
    ],
)
def test_bad_queue_filters_are_a_400_naming_the_field(api_client, items, params, field):
    if params.get("group") == "other":
        other = Taxonomy.objects.create(slug="skills", name="Skills")
        params = {**params, "group": Group.objects.create(taxonomy=other, code="S", name="S").id}
    response = api_client.get(f"{API}/review-items", params)
    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_a_bad_cursor_is_a_404_that_says_so(api_client, items):
    response = api_client.get(f"{API}/review-items", {"cursor": "garbage"})
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid cursor"}


@pytest.mark.parametrize("path", ["review-items", "judgements", "feedback-pairs"])
@pytest.mark.parametrize("position", ["abc", "", "nan", "1e999", "9" * 30, "1.5"])
def test_a_cursor_edited_by_hand_is_a_404_too(api_client, items, path, position):
    """Its form is DRF's to check, its position (an id, a priority) the list's."""
    cursor = base64.b64encode(f"p={position}".encode()).decode()
    response = api_client.get(f"{API}/{path}", {"cursor": cursor})
    if path == "review-items" and position == "1.5":  # a priority: a number like any
        assert response.status_code == 200
        return
    assert response.status_code == 404, response.content
    assert response.json() == {"detail": "Invalid cursor"}


def test_an_item_shows_its_ranked_groups_and_verdicts(api_client, items, curator):
    java = items[2]  # "Java Barista"
    judgement_create(review_item=java, user=curator, verdict="false_match")
    response = api_client.get(f"{API}/review-items/{java.id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["text"], body["status"]) == ("Java Barista", "awaiting_group")
    ranked = body["prediction"]["ranked_groups"]
    assert ranked[0]["group_id"] == java.top_group_id
    assert [g["group_id"] for g in body["candidate_groups"]] == [g["group_id"] for g in ranked[1:]]
    (verdict,) = body["judgements"]
    assert (verdict["verdict"], verdict["user"], verdict["rejected_group"]["id"]) == (
        "false_match",
        "carla",
        java.top_group_id,
    )


def test_an_unknown_item_is_a_404(api_client, items):
    response = api_client.get(f"{API}/review-items/999999")
    assert response.status_code == 404
    assert response.json() == {"detail": "no review item 999999"}


# --- claiming and releasing -----------------------------------------------------------------


def test_claiming_leases_the_item_most_worth_a_look(api_client, items):
    response = api_client.post(f"{API}/review-items/claim", format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == queue_order()[0]
    assert body["leased_by"] == "carla"
    assert body["prediction"]["ranked_groups"]
    assert ReviewItem.objects.get(id=body["id"]).leased_by.username == "carla"


def test_claiming_again_gives_back_the_item_already_held(api_client, items):
    first = api_client.post(f"{API}/review-items/claim").json()
    again = api_client.post(f"{API}/review-items/claim").json()
    assert again["id"] == first["id"]


def test_two_curators_never_hold_the_same_item(api_client, other_curator, items):
    mine = api_client.post(f"{API}/review-items/claim").json()
    theirs = client_for(other_curator).post(f"{API}/review-items/claim").json()
    assert mine["id"] != theirs["id"]
    assert (theirs["leased_by"], theirs["id"]) == ("oscar", queue_order()[1])


def test_claiming_honours_the_filters_in_the_body(api_client, items):
    response = api_client.post(
        f"{API}/review-items/claim",
        {"taxonomy": "jobs", "group": group("53-3032").id},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["text"] == "cdl driver"


def test_claiming_when_nothing_is_left_is_a_204(api_client, items, curator):
    for item in items:
        judgement_create(review_item=item, user=curator, verdict="confirm")
    response = api_client.post(f"{API}/review-items/claim")
    assert response.status_code == 204
    assert response.content == b""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "later"}, "status"),
        ({"group": "drivers"}, "group"),
        ({"score_min": [0.5]}, "score_min"),
        ({"taxonomy": 7}, "taxonomy"),
        ([1, 2], "non_field_errors"),
    ],
)
def test_a_bad_claim_is_a_400_naming_the_field_and_leases_nothing(api_client, items, body, field):
    response = api_client.post(f"{API}/review-items/claim", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not ReviewItem.objects.filter(leased_by__isnull=False).exists()


def test_releasing_gives_the_item_back_to_the_queue(api_client, other_curator, items):
    held = api_client.post(f"{API}/review-items/claim").json()
    response = api_client.post(f"{API}/review-items/{held['id']}/release")
    assert response.status_code == 200
    assert response.json()["leased_by"] is None
    assert ReviewItem.objects.get(id=held["id"]).leased_by is None
    theirs = client_for(other_curator).post(f"{API}/review-items/claim").json()
    assert theirs["id"] == held["id"]


def test_releasing_someone_elses_item_leaves_their_lease(api_client, other_curator, items):
    theirs = client_for(other_curator).post(f"{API}/review-items/claim").json()
    response = api_client.post(f"{API}/review-items/{theirs['id']}/release")
    assert response.status_code == 200
    assert response.json()["leased_by"] == "oscar"
    assert api_client.post(f"{API}/review-items/999999/release").status_code == 404


def test_review_endpoints_need_a_curator(items, user_model):
    assert APIClient().post(f"{API}/review-items/claim").status_code == 401
    stranger = client_for(user_model.objects.create_user(username="sam", password="x-pass-123"))
    assert stranger.post(f"{API}/review-items/claim").status_code == 403
    assert stranger.get(f"{API}/review-items").status_code == 403
    assert not ReviewItem.objects.filter(leased_by__isnull=False).exists()


@pytest.mark.parametrize(
    "path",
    [
        "/review-items",
        "/review-items?status=done",
        "/taxonomies/jobs/inputs",
        "/judgements",
        "/feedback-pairs",
        "/taxonomies/jobs/members",
        "/taxonomies/jobs/groups",
    ],
)
def test_a_list_costs_the_same_few_queries_however_many_rows_it_shows(
    api_client, tiny_taxonomy, curator, path
):
    def queries() -> int:
        with CaptureQueriesContext(connection) as context:
            assert api_client.get(API + path).status_code == 200
        return len(context.captured_queries)

    def judged_inputs(texts: list[str]) -> None:
        for item in inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")[::2]:
            judgement_create(review_item=item, user=curator, verdict="confirm")

    judged_inputs(["java dev 1", "java dev 2"])
    few = queries()
    judged_inputs([f"nurse {n}" for n in range(12)])
    assert queries() == few <= 6


@pytest.mark.parametrize("field", ["score_min", "score_max"])
def test_a_claims_score_bound_is_a_number_not_a_boolean(api_client, items, field):
    """DRF's FloatField reads true as 1.0: a client's bug would filter silently."""
    response = api_client.post(f"{API}/review-items/claim", {field: True}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
