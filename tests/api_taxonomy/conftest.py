"""What the taxonomy API's tests share: token clients, the tiny taxonomy's groups and members, a
second taxonomy, and everything an edit could change."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent, Group, Member, Taxonomy

API = "/api/v1"


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def admin_client(admin_user) -> APIClient:
    return client_for(admin_user)


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def member(text: str) -> Member:
    return Member.objects.get(taxonomy__slug="jobs", text=text)


def db_state() -> tuple:
    """Everything an edit could change, to show a refused one changed nothing."""
    return (
        sorted(Group.objects.values_list("id", "code", "name")),
        sorted(Member.objects.values_list("id", "group_id", "text")),
        AuditEvent.objects.count(),
    )


@pytest.fixture
def other_taxonomy(db) -> Taxonomy:
    taxonomy = Taxonomy.objects.create(slug="skills", name="Skills")
    Group.objects.create(taxonomy=taxonomy, code="S1", name="Java")
    return taxonomy
