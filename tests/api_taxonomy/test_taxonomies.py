"""Taxonomies in the API: the list, naming each one's live model, and one taxonomy's counts."""

from __future__ import annotations

from annotations.services.review.inputs import inputs_submit
from tests.api_taxonomy.conftest import API


def test_the_taxonomy_list_is_paginated_and_names_the_live_model(api_client, tiny_taxonomy):
    response = api_client.get(f"{API}/taxonomies")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (1, None, None)
    (jobs,) = body["results"]
    assert (jobs["slug"], jobs["name"]) == ("jobs", "Tiny jobs")
    assert jobs["live_model_version"]["label"] == "jobs/v1"


def test_a_taxonomy_counts_its_groups_members_and_pending_items(api_client, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista", "night nurse"], source="api")
    response = api_client.get(f"{API}/taxonomies/jobs")
    assert response.status_code == 200
    body = response.json()
    assert body["counts"] == {
        "groups": 5,
        "members": 21,
        "pending_items": 2,
        "skipped_items": 0,
        "done_items": 0,
        "conflicts": 0,
    }
    assert body["live_model_version"]["number"] == 1


def test_a_taxonomy_without_a_model_says_so(api_client, other_taxonomy):
    response = api_client.get(f"{API}/taxonomies/skills")
    assert response.status_code == 200
    assert response.json()["live_model_version"] is None


def test_an_unknown_taxonomy_is_a_404_naming_it(api_client, tiny_taxonomy):
    for path in ("/taxonomies/nope", "/taxonomies/nope/groups", "/taxonomies/nope/members"):
        response = api_client.get(API + path)
        assert response.status_code == 404
        assert response.json() == {"detail": "no taxonomy 'nope'"}
