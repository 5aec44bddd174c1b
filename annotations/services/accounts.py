"""Writes for accounts: the curator and admin roles, and API tokens."""

from __future__ import annotations

from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group as Role
from django.db import transaction
from rest_framework.authtoken.models import Token

from annotations.services.audit import audit_record

CURATORS = "curators"


@transaction.atomic
def user_ensure(
    *, username: str, password: str, admin: bool, reset_password: bool = False
) -> tuple[object, bool]:
    """Create the user if missing (an admin is staff and superuser; a curator joins the role).

    An existing user keeps its password unless ``reset_password`` is set.
    """
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=username, defaults={"is_staff": admin, "is_superuser": admin}
    )
    if created or reset_password:
        user.set_password(password)
        user.save()
    if not admin:
        role, _ = Role.objects.get_or_create(name=CURATORS)
        user.groups.add(role)
    return user, created


class TokenChanged(ValueError):
    """The token changed since the page that asked was shown (another tab or window rotated or
    revoked it): nothing is done, so a key just copied there keeps working."""


def token_mark(token: Token | None) -> str:
    """What a page remembers of the token it showed, to tell later whether it is still the one:
    the first characters of its key ("" for none)."""
    return token.key[:8] if token is not None else ""


def _refuse_if_changed(user, seen: str | None) -> None:
    """``TokenChanged`` when ``seen`` (a page's ``token_mark``) is no longer the user's token;
    callers that name no page (``seen`` None) act on whatever token there is."""
    if seen is None:
        return
    current = Token.objects.filter(user=user).first()
    if token_mark(current) != seen:
        now = "a newer one" if current is not None else "none"
        raise TokenChanged(
            f"your token changed in another tab or window since this page was shown (there is "
            f"{now} now); nothing was done: check it below and try again if you still want to"
        )


class RotatedToken(NamedTuple):
    token: Token
    replaced: bool  # whether an old token stopped working


@transaction.atomic
def api_token_rotate(*, user, seen: str | None = None) -> RotatedToken:
    """A new API token for ``user``; the old one, if any, stops working at once. Audited (the
    key itself is not: the audit trail is readable by admins). ``seen``: the asking page's
    ``token_mark``, refused (``TokenChanged``) when the token changed since."""
    get_user_model().objects.select_for_update().get(pk=user.pk)  # one rotation at a time
    _refuse_if_changed(user, seen)
    rotated = Token.objects.filter(user=user).delete()[0] > 0
    token = Token.objects.create(user=user)
    audit_record(
        actor=user,
        action="api_token.rotate" if rotated else "api_token.create",
        obj=user,
        after={"user": user.username},
    )
    return RotatedToken(token, rotated)


@transaction.atomic
def api_token_revoke(*, user, seen: str | None = None) -> bool:
    """``user`` has no API token any more: requests that carry it are refused at once. False
    (and nothing audited) when there was none. ``seen`` as for ``api_token_rotate``."""
    get_user_model().objects.select_for_update().get(pk=user.pk)
    _refuse_if_changed(user, seen)
    if Token.objects.filter(user=user).delete()[0] == 0:
        return False
    audit_record(actor=user, action="api_token.revoke", obj=user, before={"user": user.username})
    return True
