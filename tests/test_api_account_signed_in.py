"""GET /api/v1/account/signed-in: what nginx asks before it reads an upload's body
(deploy/nginx-siamweb.conf, auth_request). 204 for a token or a session, 401 for anything else,
a throttled address included: nginx takes any other answer for a failure of its own."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

URL = "/api/v1/account/signed-in"


def test_a_token_or_a_session_is_signed_in(api_client, client, curator):
    assert api_client.get(URL).status_code == 204
    client.force_login(curator)
    assert client.get(URL).status_code == 204


@pytest.mark.parametrize("authorization", [None, "Token " + "0" * 40, "Token"])
def test_anything_else_is_a_401_asking_for_a_token(db, authorization):
    client = APIClient()
    if authorization:
        client.credentials(HTTP_AUTHORIZATION=authorization)
    response = client.get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_an_address_throttled_for_bad_tokens_gets_a_401_not_a_429(db, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "bad_token", "2/min")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert [client.get(URL).status_code for _ in range(4)] == [401] * 4
    assert client.get("/api/v1/taxonomies").status_code == 429


def test_asked_for_an_admin_a_curator_is_a_403_and_an_admin_a_204(api_client, client, admin_user):
    # What nginx asks before it reads a taxonomy file, which only admins may import.
    response = api_client.get(URL, {"role": "admin"})
    assert response.status_code == 403
    assert "only admins" in response.json()["detail"]
    client.force_login(admin_user)
    assert client.get(URL, {"role": "admin"}).status_code == 204
    assert APIClient().get(URL, {"role": "admin"}).status_code == 401


def test_an_unknown_role_is_a_400_naming_the_field(api_client):
    response = api_client.get(URL, {"role": "owner"})
    assert response.status_code == 400
    assert "role" in response.json()
