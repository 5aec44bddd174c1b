"""A user's own account: the API token scripts call the API with."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from annotations.services.accounts import api_token_replace


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: the user's token, if one exists; POST: a new one (the old stops working)."""
    if request.method == "POST":
        api_token_replace(user=request.user)
        messages.info(request, "A new token is ready; the previous one no longer works.")
        return redirect("api-token")
    token = Token.objects.filter(user=request.user).values_list("key", flat=True).first()
    return render(request, "registration/api_token.html", {"token": token})
