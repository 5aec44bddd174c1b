"""REST API, version 1."""

from __future__ import annotations

from django.urls import path

from annotations import api

urlpatterns = [
    path(
        "taxonomies/<slug:slug>/normalize",
        api.NormalizeApi.as_view(),
        name="api-normalize",
    ),
]
