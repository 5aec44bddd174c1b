"""Sign-in limits (django-axes' handler, ``AXES_HANDLER``), for this site's sign-in and the admin's.

Three counts, each over ``SIAMWEB_LOGIN_LOCKOUT_MINUTES`` after its last failure:

- one username from one address (axes' own): ``SIAMWEB_LOGIN_FAILURE_LIMIT`` wrong passwords
  lock that pair;
- one address, whatever the usernames: ``SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT`` lock the address,
  so that trying a few passwords on many usernames (spraying) is cut short;
- one browser that has signed in as the username before (a signed cookie it got then): its own
  ``SIAMWEB_LOGIN_FAILURE_LIMIT``, in place of the two above.

The third is the trade against lockouts a stranger causes: anyone sharing an address (an office
behind a NAT) can lock out ``admin`` there with five wrong passwords, but not from the browsers
``admin`` has signed in with, which keep their own count. A fresh browser waits out the lockout,
or an admin lifts it (``manage.py axes_reset_username`` / ``axes_reset_ip``). A stolen cookie buys
its holder that browser's few tries, no more.
"""

from __future__ import annotations

import secrets

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.core.cache import cache
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse

SIGNED_IN_COOKIE = "siamweb_signed_in"
# How long a browser is remembered after its last sign-in.
SIGNED_IN_COOKIE_SECONDS = 180 * 24 * 3600
_SALT = "siamweb.sign_in.browser"
# Usernames one browser is remembered for: a shared computer's few, not a list to harvest.
_MAX_USERNAMES = 5


def _browser(request: HttpRequest) -> tuple[str, list[str]] | None:
    """This browser's id and the usernames it has signed in as, from its signed cookie."""
    value = request.get_signed_cookie(
        SIGNED_IN_COOKIE, default=None, salt=_SALT, max_age=SIGNED_IN_COOKIE_SECONDS
    )
    if not value:
        return None
    browser, _, usernames = value.partition(":")
    return browser, [name for name in usernames.split(",") if name]


def remember_sign_in(request: HttpRequest, response: HttpResponse, username: str) -> None:
    """After a successful sign-in: this browser has signed in as ``username`` (a signed cookie,
    readable by the server only)."""
    known = _browser(request)
    browser, usernames = known if known else (secrets.token_hex(16), [])
    usernames = [username, *(name for name in usernames if name != username)][:_MAX_USERNAMES]
    # Usernames hold letters, digits and @.+-_ only: ":" and "," separate safely.
    response.set_signed_cookie(
        SIGNED_IN_COOKIE,
        f"{browser}:{','.join(usernames)}",
        salt=_SALT,
        max_age=SIGNED_IN_COOKIE_SECONDS,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def _failures_key(browser: str, username: str) -> str:
    return f"siamweb:sign-in-failures:{browser}:{username}"


class SignInLimits(AxesDatabaseHandler):
    """axes' database handler with the address's count and the known browser's own."""

    def _known_browser(self, request: HttpRequest, credentials: dict | None) -> str | None:
        """The failures key of this browser for the username tried, if it signed in as it."""
        known = _browser(request)
        username = get_client_username(request, credentials)
        if known is None or not username or username not in known[1]:
            return None
        return _failures_key(known[0], username)

    def _address_failures(self, request: HttpRequest) -> int:
        recent = AccessAttempt.objects.filter(
            ip_address=request.axes_ip_address,
            attempt_time__gte=get_cool_off_threshold(request),
        )
        return recent.aggregate(total=Sum("failures_since_start"))["total"] or 0

    def is_locked(self, request, credentials=None) -> bool:
        known = self._known_browser(request, credentials)
        if known is not None:
            return cache.get(known, 0) >= settings.AXES_FAILURE_LIMIT
        return super().is_locked(request, credentials) or (
            self._address_failures(request) >= settings.SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT
        )

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs) -> None:
        known = self._known_browser(request, credentials) if request is not None else None
        if known is not None:
            # Counted apart from the address: nobody else's failures reach this browser's.
            failures = cache.get(known, 0) + 1
            cache.set(known, failures, int(settings.AXES_COOLOFF_TIME.total_seconds()))
            if failures >= settings.AXES_FAILURE_LIMIT:
                request.axes_locked_out = True
            return
        super().user_login_failed(sender, credentials, request, **kwargs)
        if (
            request is not None
            and not request.axes_locked_out
            and self._address_failures(request) >= settings.SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT
        ):
            request.axes_locked_out = True

    def user_logged_in(self, sender, request, user, **kwargs) -> None:
        known = self._known_browser(request, {"username": user.get_username()})
        if known is not None:
            cache.delete(known)
        super().user_logged_in(sender, request, user, **kwargs)
