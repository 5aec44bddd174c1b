"""The site's addresses and one more whose view fails: how a test reaches the 500 page."""

from __future__ import annotations

from django.urls import path

from siamweb.urls import urlpatterns as site_urlpatterns


def fail(request):
    raise RuntimeError("a failure a test asked for")


urlpatterns = [path("fail/", fail), *site_urlpatterns]
