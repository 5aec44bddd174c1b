"""Sign-in limits beyond one username at one address (siamweb.sign_in): an address trying many
usernames is stopped after SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT failures (password spraying), and a
browser that signed in as a username before keeps its own count, so that a stranger sharing its
address cannot lock that user out of it."""

from __future__ import annotations

import pytest
from django.test import Client

from siamweb.sign_in import SIGNED_IN_COOKIE

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


def sign_in(client: Client, username: str, password: str, url: str = LOGIN) -> int:
    return client.post(url, {"username": username, "password": password}).status_code


def test_spraying_many_usernames_from_one_address_is_cut_short(curator, other_curator, settings):
    settings.SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT = 10
    sprayer = Client()
    statuses = [sign_in(sprayer, f"user{n}", "Summer2024!") for n in range(12)]
    assert statuses == [200] * 9 + [429] * 3
    # The address is paused for every username, the right password included ...
    assert sign_in(Client(), "carla", "carla-pass-123") == 429
    # ... and no other address is.
    assert sign_in(Client(REMOTE_ADDR="192.0.2.7"), "oscar", "oscar-pass-123") == 302


def test_the_address_limit_comes_from_the_settings(curator, settings):
    settings.SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT = 3
    sprayer = Client()
    assert [sign_in(sprayer, name, "x") for name in ("a", "b", "c", "d")] == [200, 200, 429, 429]


def test_the_lockout_page_names_both_limits(db, settings):
    settings.SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT = 2
    client = Client()
    sign_in(client, "a", "x")
    page = client.post(LOGIN, {"username": "b", "password": "x"})
    assert page.status_code == 429
    html = page.content.decode()
    assert "or 2 for any usernames from it" in html
    assert "keeps its own count" in html


def test_a_stranger_on_the_admins_address_cannot_lock_the_admin_out_of_their_browser(admin_user):
    admins_browser = Client()
    assert sign_in(admins_browser, "ada", "ada-pass-123") == 302
    assert admins_browser.cookies[SIGNED_IN_COOKIE].value
    admins_browser.post("/accounts/logout/")

    stranger = Client()  # the same address: an office behind one NAT
    assert [sign_in(stranger, "ada", "guess") for _ in range(6)] == [200] * 4 + [429] * 2
    assert sign_in(stranger, "ada", "ada-pass-123") == 429

    assert sign_in(admins_browser, "ada", "ada-pass-123") == 302
    # The admin's own sign-in page is spared the same way.
    admins_browser.post("/accounts/logout/")
    assert sign_in(admins_browser, "ada", "ada-pass-123", ADMIN_LOGIN) == 302


def test_the_trade_a_fresh_browser_on_that_address_waits(admin_user):
    stranger = Client()
    for _ in range(5):
        sign_in(stranger, "ada", "guess")
    assert sign_in(Client(), "ada", "ada-pass-123") == 429


def test_a_known_browser_has_its_own_limit_and_a_success_resets_it(curator, settings):
    browser = Client()
    assert sign_in(browser, "carla", "carla-pass-123") == 302
    browser.post("/accounts/logout/")
    assert [sign_in(browser, "carla", "wrong") for _ in range(4)] == [200] * 4
    assert sign_in(browser, "carla", "carla-pass-123") == 302
    browser.post("/accounts/logout/")
    assert [sign_in(browser, "carla", "wrong") for _ in range(6)] == [200] * 4 + [429] * 2
    assert sign_in(browser, "carla", "carla-pass-123") == 429
    # Its failures were its own: another browser at the address is not held up.
    assert sign_in(Client(), "carla", "carla-pass-123") == 302


@pytest.mark.parametrize("cookie", ["forged:carla", "0123abcd:carla"])
def test_a_cookie_the_server_did_not_sign_counts_for_nothing(curator, cookie):
    stranger = Client()
    for _ in range(5):
        sign_in(stranger, "carla", "guess")
    forger = Client()
    forger.cookies[SIGNED_IN_COOKIE] = cookie
    assert sign_in(forger, "carla", "carla-pass-123") == 429


def test_a_browser_is_known_only_for_the_usernames_it_signed_in_as(curator, other_curator):
    browser = Client()
    assert sign_in(browser, "oscar", "oscar-pass-123") == 302
    browser.post("/accounts/logout/")
    stranger = Client()
    for _ in range(5):
        sign_in(stranger, "carla", "guess")
    assert sign_in(browser, "carla", "carla-pass-123") == 429
