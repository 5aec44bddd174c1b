"""A client address that sent more invalid API tokens than SIAMWEB_BAD_TOKEN_RATE allows is
answered 429 with Retry-After for every invalid key until the window has passed; only invalid
keys are counted, and a valid key is served whatever its address sent: behind a NAT or a proxy,
one client sending bad tokens denies the API to nobody else."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

URL = "/api/v1/taxonomies"
GUESS = "Token " + "0" * 40


@pytest.fixture(autouse=True)
def _three_bad_tokens_a_minute(monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "bad_token", "3/min")


def client_at(address: str, authorization: str | None = None) -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    if authorization:
        client.credentials(HTTP_AUTHORIZATION=authorization)
    return client


def test_past_the_rate_every_token_request_from_that_address_is_a_429(curator):
    guesser = client_at("198.51.100.4", GUESS)
    assert [guesser.get(URL).status_code for _ in range(3)] == [401, 401, 401]
    refused = guesser.get(URL)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert refused.json()["detail"].startswith("Too many invalid tokens from this address.")
    assert client_at("198.51.100.4", "Token " + "1" * 40).get(URL).status_code == 429


def test_a_valid_token_from_a_throttled_address_is_served(curator):
    """A client behind the same NAT as a bad one: it once got 429 for a minute."""
    guesser = client_at("198.51.100.4", GUESS)
    assert [guesser.get(URL).status_code for _ in range(5)] == [401, 401, 401, 429, 429]
    good = Token.objects.create(user=curator)
    same_address = client_at("198.51.100.4", f"Token {good.key}")
    assert {same_address.get(URL).status_code for _ in range(5)} == {200}
    assert guesser.get(URL).status_code == 429  # the bad client still is not


def test_a_revoked_token_sent_in_a_loop_holds_up_only_itself(curator, other_curator):
    revoked = Token.objects.create(user=curator)
    key = revoked.key
    revoked.delete()
    looping = client_at("198.51.100.4", f"Token {key}")
    assert [looping.get(URL).status_code for _ in range(4)] == [401, 401, 401, 429]
    good = Token.objects.create(user=other_curator)
    assert client_at("198.51.100.4", f"Token {good.key}").get(URL).status_code == 200


def test_other_addresses_are_not_held_up(curator):
    guesser = client_at("198.51.100.4", GUESS)
    for _ in range(4):
        guesser.get(URL)
    good = Token.objects.create(user=curator)
    assert client_at("203.0.113.9", f"Token {good.key}").get(URL).status_code == 200
    assert client_at("203.0.113.9", GUESS).get(URL).status_code == 401


def test_good_tokens_are_never_counted(curator):
    good = Token.objects.create(user=curator)
    client = client_at("198.51.100.4", f"Token {good.key}")
    assert {client.get(URL).status_code for _ in range(10)} == {200}
    assert client_at("198.51.100.4", GUESS).get(URL).status_code == 401


def test_the_window_passing_lets_the_address_in_again(curator, monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setattr(SimpleRateThrottle, "timer", lambda self: now[0])
    guesser = client_at("198.51.100.4", GUESS)
    for _ in range(3):
        guesser.get(URL)
    assert guesser.get(URL).status_code == 429
    now[0] += 61
    assert guesser.get(URL).status_code == 401


def test_a_session_is_not_throttled_by_bad_tokens_of_its_address(curator, client):
    guesser = client_at("127.0.0.1", GUESS)
    for _ in range(4):
        guesser.get(URL)
    client.force_login(curator)
    assert client.get(URL).status_code == 200


def test_behind_a_proxy_the_forwarded_address_is_counted(curator, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    settings.SIAMWEB_PROXY_SECRET = "s" * 32
    guesser = client_at("10.0.0.1", GUESS)
    guesser.defaults["HTTP_X_SIAMWEB_PROXY_SECRET"] = "s" * 32
    for _ in range(3):
        guesser.get(URL, HTTP_X_FORWARDED_FOR="198.51.100.4")
    assert guesser.get(URL, HTTP_X_FORWARDED_FOR="198.51.100.4").status_code == 429
    assert guesser.get(URL, HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 401
