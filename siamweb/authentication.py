"""API token authentication with the token and its user read in one plain-SQL query; tokens that
expire, and a client address that keeps sending invalid ones answered 429 instead of 401, while
a valid token from the same address is served: one bad client behind a NAT or a proxy denies
nobody else."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions, throttling
from rest_framework.authtoken.models import Token

from siamweb.plain_sql import ModelColumns

_TOKEN = ModelColumns(Token, "t")
_USER = ModelColumns(get_user_model(), "u")
_SQL = (
    f"SELECT {_TOKEN.sql}, {_USER.sql} FROM {Token._meta.db_table} t "
    f"JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id WHERE t.key = %s"
)


def client_address(request: HttpRequest) -> str:
    """The client's address as DRF's throttles read it: the connection's, or behind
    ``SIAMWEB_PROXY_COUNT`` proxies the one they put in X-Forwarded-For. The login lockout
    (``AXES_CLIENT_IP_CALLABLE``) reads it here too, so both count the same client."""
    return throttling.BaseThrottle().get_ident(request)


def token_expiry(created: datetime) -> datetime | None:
    """When a token made at ``created`` stops working; None if tokens never expire."""
    days = settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS
    return created + timedelta(days=days) if days else None


class UnknownToken(exceptions.AuthenticationFailed):
    """A key that matches no token: a mistake, or a guess."""


class BadTokenThrottle(throttling.SimpleRateThrottle):
    """Invalid tokens sent from one client address, at most ``SIAMWEB_BAD_TOKEN_RATE``
    (DRF's ``bad_token`` rate). Asked only once a key matched no token, and only such keys are
    counted: a valid token is served whatever its address sent before."""

    scope = "bad_token"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def throttle_success(self) -> bool:
        return True  # asking is free: only a failure is counted (record_failure)

    def record_failure(self) -> None:
        if self.rate is None:
            return
        history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]
        self.cache.set(self.key, [self.now, *history], self.duration)


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's ``Authorization: Token …``, answering as it does; its ``select_related`` query
    cost every API request more than half a millisecond to build (``siamweb.plain_sql``).

    A token older than ``SIAMWEB_API_TOKEN_MAX_AGE_DAYS`` is refused, saying so. An unknown key
    from an address that sent too many is answered 429 (with Retry-After) rather than 401; a
    valid key is never held up by the keys others sent from its address. The key is looked up
    first (one indexed read): a key of 40 random hex digits is not guessed, however many tries
    an address gets."""

    def authenticate(self, request):
        words = authentication.get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword.lower().encode():
            return None  # no token: another authentication (the session) may answer
        try:
            return super().authenticate(request)
        except UnknownToken:
            throttle = BadTokenThrottle()
            if not throttle.allow_request(request, None):
                raise exceptions.Throttled(
                    throttle.wait(), detail="Too many invalid tokens from this address."
                ) from None
            throttle.record_failure()
            raise

    def authenticate_credentials(self, key: str):
        with connection.cursor() as cursor:
            cursor.execute(_SQL, [key])
            row = cursor.fetchone()
        if row is None:
            raise UnknownToken(_("Invalid token."))
        token = _TOKEN.instance(row[: len(_TOKEN)])
        token.user = _USER.instance(row[len(_TOKEN) :])
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        expires = token_expiry(token.created)
        if expires is not None and expires <= timezone.now():
            raise exceptions.AuthenticationFailed(
                f"Token expired on {expires:%Y-%m-%d %H:%M} UTC (tokens last "
                f"{settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS} days): make a new one on the "
                f"page {reverse('api-token')}"
            )
        return token.user, token
