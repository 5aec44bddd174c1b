"""A user's own account: the sign-in page, the API token scripts call the API with, and the page a
sign-in locked out by too many failures answers."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from annotations.selectors.accounts import api_token_of
from annotations.services.accounts import (
    TokenChanged,
    api_token_revoke,
    api_token_rotate,
    token_mark,
)
from siamweb.sign_in import remember_sign_in


class SignInView(auth_views.LoginView):
    """Django's sign-in page; a browser that signs in is remembered for that username, so that
    failures from others sharing its address never lock it out (siamweb.sign_in)."""

    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        remember_sign_in(self.request, response, form.get_user().get_username())
        return response


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: the user's token with when it was made and when it expires; POST ``action=rotate``:
    a new one (the old stops working at once), ``action=revoke``: none at all."""
    error, status = "", 200
    if request.method == "POST":
        action = request.POST.get("action", "rotate")
        # What the page showed: a page older than the token does nothing (TokenChanged).
        seen = request.POST.get("seen")
        try:
            if action == "rotate":
                replaced = api_token_rotate(user=request.user, seen=seen).replaced
                said = "the previous one no longer works" if replaced else "keep it like a password"
                messages.info(request, f"A new token is ready; {said}.")
            elif action == "revoke":
                if api_token_revoke(user=request.user, seen=seen):
                    messages.info(request, "Your token is revoked: requests that carry it get 401.")
            else:
                return HttpResponseBadRequest("action must be rotate or revoke")
        except TokenChanged as exc:
            error, status = str(exc), 409
        else:
            return redirect("api-token")
    token = api_token_of(user=request.user)
    context = {
        "token": token,
        "seen": token_mark(token),
        "error": error,
        "expired": token is not None and token.expired(timezone.now()),
        "max_age_days": settings.SIAMWEB_API_TOKEN_MAX_AGE_DAYS,
    }
    return render(request, "registration/api_token.html", context, status=status)


def login_locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials=None
) -> HttpResponse:
    """What a sign-in (this site's or the admin's) answers once django-axes has locked its
    username and address out (``AXES_LOCKOUT_CALLABLE``): 429, when to try again, and that an
    admin can unlock it sooner."""
    cool_off = settings.AXES_COOLOFF_TIME
    context = {
        "minutes": round(cool_off.total_seconds() / 60),
        "retry_at": timezone.now() + cool_off,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "address_failure_limit": settings.SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT,
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response
