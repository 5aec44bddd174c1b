"""A user gets their API token from a page: created on request, replaced on request (the old
one stops working), and the API answers it with the user's role."""

from __future__ import annotations

import re

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent


def shown_token(page: str) -> str:
    return re.search(r'data-testid="api-token">(\w+)<', page).group(1)


def test_a_curator_creates_a_token_the_api_answers_then_replaces_it(client, curator, tiny_taxonomy):
    client.force_login(curator)
    page = client.get("/accounts/token/").content.decode()
    assert 'data-testid="no-api-token"' in page
    assert client.post("/accounts/token/").status_code == 302
    first = shown_token(client.get("/accounts/token/").content.decode())
    assert Token.objects.get(user=curator).key == first

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    answer = api.post("/api/v1/taxonomies/jobs/normalize", {"texts": ["icu nurse"]}, format="json")
    assert answer.status_code == 200

    client.post("/accounts/token/")
    page = client.get("/accounts/token/").content.decode()
    assert "the previous one no longer works" in page
    second = shown_token(page)
    assert second != first
    answer = api.post("/api/v1/taxonomies/jobs/normalize", {"texts": ["icu nurse"]}, format="json")
    assert answer.status_code == 401
    assert list(
        AuditEvent.objects.filter(actor=curator).order_by("id").values_list("action", flat=True)
    ) == ["api_token.create", "api_token.replace"]


def test_the_token_page_needs_a_login_and_every_page_links_to_it(client, curator):
    response = client.get("/accounts/token/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    client.force_login(curator)
    assert (
        'href="/accounts/token/" data-testid="api-token-link"'
        in client.get("/review/").content.decode()
    )
