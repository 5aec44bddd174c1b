"""Scripts manage their owner's own API token: read when it was made and expires (never the key),
rotate it (the new key shown once, the old refused at once), revoke it. Session or token; only
ever the caller's own token; throttled per user at SIAMWEB_TOKEN_API_RATE."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from annotations.models import AuditEvent

URL = "/api/v1/account/token"
ROTATE = "/api/v1/account/token/rotate"


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def token(curator) -> Token:
    return Token.objects.create(user=curator)


def test_the_owner_reads_when_the_token_was_made_and_expires_but_never_the_key(token, settings):
    response = with_token(token.key).get(URL)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"created", "expires"}
    assert token.key not in response.content.decode()
    created, expires = (datetime.fromisoformat(body[name]) for name in ("created", "expires"))
    assert created == token.created
    assert expires == token.created + timedelta(days=settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS)


def test_tokens_that_never_expire_say_so(token, settings):
    settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS = 0
    assert with_token(token.key).get(URL).json()["expires"] is None


def test_rotating_gives_a_new_key_once_and_the_old_stops_at_once(curator, token):
    old = with_token(token.key)
    response = old.post(ROTATE)
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"key", "created", "expires"}
    assert body["key"] != token.key
    assert Token.objects.get(user=curator).key == body["key"]
    assert old.get(URL).status_code == 401
    assert with_token(body["key"]).get(URL).status_code == 200
    assert AuditEvent.objects.filter(actor=curator, action="api_token.rotate").count() == 1


def test_revoking_leaves_no_token(curator, token):
    client = with_token(token.key)
    assert client.delete(URL).status_code == 204
    assert not Token.objects.filter(user=curator).exists()
    assert client.get(URL).status_code == 401
    assert AuditEvent.objects.filter(actor=curator, action="api_token.revoke").count() == 1


def test_a_session_without_a_token_makes_one_and_revokes_it(curator, client):
    client.force_login(curator)
    missing = client.get(URL)
    assert missing.status_code == 404
    assert "no API token" in missing.json()["detail"]
    made = client.post(ROTATE)
    assert made.status_code == 201
    assert Token.objects.get(user=curator).key == made.json()["key"]
    assert AuditEvent.objects.filter(actor=curator, action="api_token.create").count() == 1
    assert client.delete(URL).status_code == 204
    assert client.delete(URL).status_code == 404


def test_a_session_must_send_its_csrf_token_to_rotate_or_revoke(curator, token):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(curator)
    assert browser.post(ROTATE).status_code == 403
    assert browser.delete(URL).status_code == 403
    assert Token.objects.get(user=curator).key == token.key


def test_only_the_callers_own_token_is_touched(curator, other_curator, token):
    others = Token.objects.create(user=other_curator)
    mine = with_token(token.key)
    new_key = mine.post(ROTATE).json()["key"]
    assert Token.objects.get(user=other_curator).key == others.key
    assert with_token(new_key).delete(URL).status_code == 204
    assert Token.objects.filter(user=other_curator).exists()
    assert with_token(others.key).get(URL).status_code == 200


def test_anonymous_callers_are_refused(db):
    assert APIClient().get(URL).status_code == 401
    assert APIClient().post(ROTATE).status_code == 401


def test_the_token_endpoints_are_throttled_per_user(curator, other_curator, token, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "token", "2/hour")
    mine = with_token(token.key)
    assert [mine.get(URL).status_code for _ in range(3)] == [200, 200, 429]
    assert int(mine.get(URL)["Retry-After"]) > 0
    others = with_token(Token.objects.create(user=other_curator).key)
    assert others.get(URL).status_code == 200
    # The rest of the API is not this scope's.
    assert mine.get("/api/v1/taxonomies").status_code == 200
