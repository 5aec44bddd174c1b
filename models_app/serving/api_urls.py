"""Serving's API route (mounted at /api/v1/ by siamweb/api_urls.py): normalize."""

from __future__ import annotations

from django.urls import path

from models_app.serving.api import NormalizeApi

urlpatterns = [
    path("taxonomies/<slug:slug>/normalize", NormalizeApi.as_view(), name="api-normalize"),
]
