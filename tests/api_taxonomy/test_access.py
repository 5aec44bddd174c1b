"""Who may do what in the taxonomy API: anonymous requests get 401, users without a role 403;
curators read, and their edits are refused and change nothing."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.api_taxonomy.conftest import API, client_for, db_state, group, member


@pytest.fixture
def stranger_client(user_model) -> APIClient:
    """Signed in, but neither a curator nor an admin."""
    return client_for(user_model.objects.create_user(username="sam", password="sam-pass-123"))


@pytest.mark.parametrize(
    "path",
    [
        "/taxonomies",
        "/taxonomies/jobs",
        "/taxonomies/jobs/groups",
        "/taxonomies/jobs/members",
        "/groups/1",
        "/members/1",
    ],
)
def test_anonymous_requests_are_refused_with_401(tiny_taxonomy, path):
    response = APIClient().get(API + path)
    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_a_signed_in_user_without_the_curator_role_is_forbidden(tiny_taxonomy, stranger_client):
    response = stranger_client.get(f"{API}/taxonomies")
    assert response.status_code == 403
    assert response.json() == {"detail": "curators only"}


def test_session_authentication_works_for_reads(client, curator, tiny_taxonomy):
    client.force_login(curator)
    assert client.get(f"{API}/taxonomies/jobs").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/taxonomies/jobs/groups", {"code": "99-0001", "name": "Astronauts"}),
        ("patch", "/groups/{nurses}", {"name": "Nurses"}),
        ("post", "/groups/{nurses}/merge", {"into": "{baristas}"}),
        ("post", "/taxonomies/jobs/members", {"group": "{nurses}", "text": "Night Nurse"}),
        ("patch", "/members/{icu}", {"group": "{baristas}"}),
        ("delete", "/members/{icu}", None),
    ],
)
def test_a_curator_cannot_edit_the_taxonomy_and_nothing_changes(
    api_client, tiny_taxonomy, method, path, body
):
    ids = {
        "nurses": group("29-1141").id,
        "baristas": group("35-3023").id,
        "icu": member("ICU Nurse").id,
    }
    if body:
        body = {
            key: int(value.format(**ids)) if value.startswith("{") else value
            for key, value in body.items()
        }
    before = db_state()
    response = getattr(api_client, method)(API + path.format(**ids), body, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "admins only"}
    assert db_state() == before
