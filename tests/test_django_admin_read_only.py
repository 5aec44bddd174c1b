"""Django's admin site only browses the curation rows: changes go through the services, which
keep the audit trail, the feedback pairs and the index in step."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotations.models import Member


@pytest.fixture
def admin_client_ada(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_an_admin_can_browse_members(admin_client_ada, tiny_taxonomy):
    response = admin_client_ada.get("/admin/annotations/member/")
    assert response.status_code == 200
    assert b"Java Software Engineer" in response.content


def test_an_admin_cannot_add_a_member_behind_the_services_back(admin_client_ada, tiny_taxonomy):
    group = tiny_taxonomy.groups.get(code="15-1252")
    before = Member.objects.count()
    response = admin_client_ada.post(
        "/admin/annotations/member/add/", {"group": group.id, "text": "Rust Developer"}
    )
    assert response.status_code == 403
    assert Member.objects.count() == before


def test_an_admin_cannot_delete_a_member_from_the_admin_site(admin_client_ada, tiny_taxonomy):
    member = Member.objects.get(text="Java Software Engineer")
    response = admin_client_ada.post(
        f"/admin/annotations/member/{member.id}/delete/", {"post": "yes"}
    )
    assert response.status_code == 403
    assert Member.objects.filter(id=member.id).exists()


def test_no_api_key_is_shown_or_made_on_the_admin_site(admin_client_ada, curator):
    """A key there would let an admin act as the curator, and no audit event would say so."""
    key = Token.objects.create(user=curator).key
    listed = admin_client_ada.get("/admin/authtoken/tokenproxy/")
    assert listed.status_code == 404
    made = admin_client_ada.post("/admin/authtoken/tokenproxy/add/", {"user": curator.id})
    assert made.status_code == 404
    assert list(Token.objects.values_list("key", flat=True)) == [key]
    assert key not in admin_client_ada.get("/admin/").content.decode()
