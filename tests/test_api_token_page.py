"""A user gets their API token from a page: created on request, rotated on request (the old
one stops working), revoked on request; the page says when it was made and when it expires, and
the API answers it with the user's role."""

from __future__ import annotations

import re
from datetime import timedelta

from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent


def shown_token(page: str) -> str:
    return re.search(r'data-testid="api-token">(\w+)<', page).group(1)


def test_a_curator_creates_a_token_the_api_answers_then_rotates_it(client, curator, tiny_taxonomy):
    client.force_login(curator)
    page = client.get("/accounts/token/").content.decode()
    assert 'data-testid="no-api-token"' in page
    assert client.post("/accounts/token/").status_code == 302
    page = client.get("/accounts/token/").content.decode()
    # A first token replaces nothing, so nothing is said to stop working.
    assert "A new token is ready; keep it like a password." in page
    assert "previous one" not in page
    first = shown_token(page)
    assert Token.objects.get(user=curator).key == first

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    answer = api.post("/api/v1/taxonomies/jobs/normalize", {"texts": ["icu nurse"]}, format="json")
    assert answer.status_code == 200

    client.post("/accounts/token/", {"action": "rotate"})
    page = client.get("/accounts/token/").content.decode()
    assert "the previous one no longer works" in page
    second = shown_token(page)
    assert second != first
    answer = api.post("/api/v1/taxonomies/jobs/normalize", {"texts": ["icu nurse"]}, format="json")
    assert answer.status_code == 401
    events = AuditEvent.objects.filter(actor=curator).order_by("id")
    assert list(events.values_list("action", "object_type", "object_id")) == [
        ("api_token.create", "user", str(curator.pk)),
        ("api_token.rotate", "user", str(curator.pk)),
    ]


def test_the_token_page_needs_a_login_and_every_page_links_to_it(client, curator):
    response = client.get("/accounts/token/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    client.force_login(curator)
    assert (
        'href="/accounts/token/" data-testid="api-token-link"'
        in client.get("/review/").content.decode()
    )


def test_the_page_says_when_the_token_was_made_and_when_it_expires(client, curator, settings):
    token = Token.objects.create(user=curator)
    made = timezone.now() - timedelta(days=10)
    Token.objects.filter(pk=token.pk).update(created=made)
    client.force_login(curator)
    page = client.get("/accounts/token/").content.decode()
    assert f'data-testid="api-token-created">{made:%Y-%m-%d %H:%M} UTC<' in page
    expires = made + timedelta(days=settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS)
    assert f'data-testid="api-token-expires">{expires:%Y-%m-%d %H:%M} UTC<' in page
    assert 'data-testid="api-token-rotate"' in page and 'data-testid="api-token-revoke"' in page


def test_an_expired_token_is_marked_so_on_the_page(client, curator):
    token = Token.objects.create(user=curator)
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=400))
    client.force_login(curator)
    assert "expired: the API refuses it" in client.get("/accounts/token/").content.decode()


def test_tokens_that_never_expire_say_never(client, curator, settings):
    settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS = 0
    Token.objects.create(user=curator)
    client.force_login(curator)
    assert (
        'data-testid="api-token-expires">never<' in client.get("/accounts/token/").content.decode()
    )


def test_revoking_leaves_no_token_and_the_api_refuses_the_old_one(client, curator):
    token = Token.objects.create(user=curator)
    client.force_login(curator)
    assert client.post("/accounts/token/", {"action": "revoke"}).status_code == 302
    page = client.get("/accounts/token/").content.decode()
    assert "Your token is revoked" in page
    assert 'data-testid="no-api-token"' in page
    assert not Token.objects.filter(user=curator).exists()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/v1/taxonomies").status_code == 401
    assert AuditEvent.objects.filter(actor=curator, action="api_token.revoke").count() == 1


def test_rotate_and_revoke_need_the_csrf_token(curator):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(curator)
    token = Token.objects.create(user=curator)
    assert browser.post("/accounts/token/", {"action": "revoke"}).status_code == 403
    assert browser.post("/accounts/token/", {"action": "rotate"}).status_code == 403
    assert Token.objects.get(user=curator).key == token.key


def test_an_unknown_action_changes_nothing(client, curator):
    token = Token.objects.create(user=curator)
    client.force_login(curator)
    assert client.post("/accounts/token/", {"action": "explode"}).status_code == 400
    assert Token.objects.get(user=curator).key == token.key


def test_a_page_older_than_the_token_rotates_or_revokes_nothing(client, curator):
    client.force_login(curator)
    client.post("/accounts/token/", {"action": "rotate"})
    stale = client.get("/accounts/token/").content.decode()
    seen = re.search(r'name="seen" value="(\w*)"', stale).group(1)
    # Another tab rotates it; the user copies the new key there.
    client.post("/accounts/token/", {"action": "rotate", "seen": seen})
    copied = Token.objects.get(user=curator).key
    events = AuditEvent.objects.count()
    for action in ("rotate", "revoke"):
        response = client.post("/accounts/token/", {"action": action, "seen": seen})
        assert response.status_code == 409
        page = response.content.decode()
        assert "your token changed in another tab or window" in page
        assert "nothing was done" in page
        # The page shows the token as it is now, ready to act on.
        assert shown_token(page) == copied
    assert Token.objects.get(user=curator).key == copied
    assert AuditEvent.objects.count() == events
    # From a page that shows the current token, both work.
    fresh = re.search(r'name="seen" value="(\w*)"', page).group(1)
    assert client.post("/accounts/token/", {"action": "revoke", "seen": fresh}).status_code == 302
    assert not Token.objects.filter(user=curator).exists()
