"""API tokens expire SIAMWEB_API_TOKEN_MAX_AGE_DAYS (90) after they were made: an expired one is a
401 that says so and where to make a new one; 0 means they never expire."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

URL = "/api/v1/taxonomies"


def made_days_ago(user, days: float) -> Token:
    token = Token.objects.create(user=user)
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=days))
    return token


def get_with(token: Token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client.get(URL)


def test_a_token_younger_than_the_limit_works(curator):
    assert get_with(made_days_ago(curator, 89)).status_code == 200


def test_an_expired_token_is_a_401_that_says_so_and_where_to_make_one(curator):
    token = made_days_ago(curator, 90.01)
    response = get_with(token)
    assert response.status_code == 401
    detail = response.json()["detail"]
    assert "expired" in detail
    assert "90 days" in detail
    assert "/accounts/token/" in detail
    assert response["WWW-Authenticate"] == "Token"


def test_the_limit_comes_from_the_setting(curator, settings):
    settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS = 7
    assert get_with(made_days_ago(curator, 8)).status_code == 401


def test_zero_days_means_tokens_never_expire(curator, settings):
    settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS = 0
    assert get_with(made_days_ago(curator, 3650)).status_code == 200


def test_an_expired_token_is_not_counted_as_a_guess(curator, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "bad_token", "2/min")
    token = made_days_ago(curator, 100)
    assert [get_with(token).status_code for _ in range(4)] == [401] * 4
