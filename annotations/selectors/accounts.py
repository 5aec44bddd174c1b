"""Reads for accounts: a user's API token, when it was made and when it stops working."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rest_framework.authtoken.models import Token

from siamweb.authentication import token_expiry


@dataclass(frozen=True)
class ApiToken:
    key: str
    created: datetime
    expires: datetime | None  # None: tokens never expire (SIAMWEB_API_TOKEN_MAX_AGE_DAYS=0)

    @classmethod
    def of(cls, token: Token) -> ApiToken:
        return cls(key=token.key, created=token.created, expires=token_expiry(token.created))

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and self.expires <= now


def api_token_of(*, user) -> ApiToken | None:
    """``user``'s API token, or None if they have none."""
    token = Token.objects.filter(user=user).first()
    return None if token is None else ApiToken.of(token)
