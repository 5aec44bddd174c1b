from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotations.models import Taxonomy

URL = "/api/v1/taxonomies/jobs/normalize"


def test_anonymous_requests_are_refused(tiny_taxonomy):
    response = APIClient().post(URL, {"texts": ["nurse"]}, format="json")
    assert response.status_code == 401
    assert "texts" not in response.json()


def test_a_bad_token_is_refused(tiny_taxonomy):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.post(URL, {"texts": ["nurse"]}, format="json").status_code == 401


def test_it_returns_ranked_groups_with_evidence_and_model_version(api_client, tiny_taxonomy):
    response = api_client.post(
        URL, {"texts": ["Senior Java Engineer", "icu nurse"], "k": 3}, format="json"
    )
    assert response.status_code == 200
    first, second = response.json()["results"]
    assert first["text"] == "Senior Java Engineer"
    assert first["model_version"] == "jobs/v1"
    assert first["source"] == "model"
    assert len(first["groups"]) == 3
    top = first["groups"][0]
    assert (top["code"], top["name"], top["member"]) == (
        "15-1252",
        "Software Developers",
        "Java Software Engineer",
    )
    assert 0 < top["score"] <= 1
    # Ranked by the evidence (the prior: the best member and the description); the clear
    # winner also has the most similar member.
    scores = [group["score"] for group in first["groups"]]
    assert top["score"] == max(scores) and all(0 <= s <= 1 for s in scores)
    assert second["groups"][0]["code"] == "29-1141"
    assert second["groups"][0]["member"] == "ICU Nurse"


def test_session_authentication_works_too(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.post(URL, {"texts": ["truck driver"]}, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["results"][0]["groups"][0]["code"] == "53-3032"


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "texts", "This field is required."),
        ({"texts": []}, "texts", "This list may not be empty."),
        ({"texts": "nurse"}, "texts", 'Expected a list of items but got type "str".'),
        ({"texts": ["ok", "   "]}, "texts", "is empty"),
        ({"texts": [""]}, "texts", "is empty"),
        ({"texts": [None]}, "texts", "This field may not be null."),
        ({"texts": ["x" * 201]}, "texts", "longer than 200 characters"),
        ({"texts": ["tab\tok", "nul\x00"]}, "texts", "control characters"),
        ({"texts": [7]}, "texts", "must be a string"),
        ({"texts": ["nurse"], "k": 0}, "k", "greater than or equal to 1"),
        ({"texts": ["nurse"], "k": 51}, "k", "at most 50"),
        ({"texts": ["nurse"], "k": "many"}, "k", "A valid integer is required."),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api_client, tiny_taxonomy, body, field, message):
    response = api_client.post(URL, body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field]
    assert message in str(errors[field])


def test_too_many_texts_are_refused(api_client, tiny_taxonomy, settings):
    settings.SIAMWEB_MAX_TEXTS_PER_REQUEST = 3
    response = api_client.post(URL, {"texts": ["a b", "c d", "e f", "g h"]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"texts": ["at most 3 texts per request"]}


def test_malformed_json_is_a_400(api_client, tiny_taxonomy):
    response = api_client.post(URL, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


def test_an_unknown_taxonomy_is_a_404(api_client, tiny_taxonomy):
    response = api_client.post("/api/v1/taxonomies/nope/normalize", {"texts": ["x"]}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": "no taxonomy 'nope'"}


def test_a_taxonomy_without_a_model_is_a_409_that_says_what_to_run(api_client):
    Taxonomy.objects.create(slug="bare", name="Bare")
    response = api_client.post("/api/v1/taxonomies/bare/normalize", {"texts": ["x"]}, format="json")
    assert response.status_code == 409
    assert "manage.py train bare --activate" in response.json()["detail"]


def test_a_form_encoded_body_is_refused_as_not_json(api_client, tiny_taxonomy):
    response = api_client.post(URL, {"texts": "nurse"})  # multipart form
    assert response.status_code == 415
    assert "Unsupported media type" in response.json()["detail"]
