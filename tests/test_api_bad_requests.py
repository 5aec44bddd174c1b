"""What the fuzzer found: requests the schema allows or forbids get a JSON answer that the schema
documents, never Django's HTML pages and never a 500."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

API = "/api/v1"


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/groups/abc",
        f"{API}/groups/-1",
        f"{API}/taxonomies/not%20a%20slug",
        f"{API}/no-such-endpoint",
        f"{API}/taxonomies/",  # a trailing slash the routes do not have
    ],
)
def test_a_path_no_endpoint_matches_is_a_json_404(api_client, path):
    response = api_client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "detail" in response.json()


def test_a_path_no_endpoint_matches_still_needs_a_token(db):
    response = APIClient().get(f"{API}/no-such-endpoint")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/feedback-pairs?taxonomy=x%00y",
        f"{API}/review-items?taxonomy=x%00y",
        f"{API}/model-versions?taxonomy=x%00y",
        f"{API}/training-runs?taxonomy=x%00y",
        f"{API}/feedback-pairs?taxonomy=",
    ],
)
def test_a_taxonomy_filter_that_cannot_be_a_slug_is_a_400(api_client, path):
    response = api_client.get(path)
    assert response.status_code == 400
    assert list(response.json()) == ["taxonomy"]


def test_a_username_filter_of_blanks_is_a_400_naming_it(api_client):
    response = api_client.get(f"{API}/judgements", {"user": "\x1c"})
    assert response.status_code == 400
    assert list(response.json()) == ["user"]


def test_an_empty_page_number_is_refused_like_any_page_that_is_not_a_number(api_client):
    response = api_client.get(f"{API}/taxonomies?page=")
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid page: empty"}


def test_a_text_longer_than_the_limit_as_sent_is_refused_though_its_blanks_collapse(
    api_client, tiny_taxonomy
):
    text = "nurse" + " " * 200  # 205 characters sent, 5 once cleaned
    response = api_client.post(f"{API}/taxonomies/jobs/normalize", {"texts": [text]}, format="json")
    assert response.status_code == 400
    assert "longer than 200 characters (205)" in str(response.json()["texts"])


def test_a_lone_surrogate_sent_as_a_json_escape_is_refused(api_client, tiny_taxonomy):
    # The schema's pattern cannot name it (no UTF-8 text holds one); the text rule refuses it.
    body = '{"texts": ["nurse \\ud800"]}'
    response = api_client.post(
        f"{API}/taxonomies/jobs/normalize", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "U+D800" in str(response.json()["texts"])
