"""Serving's API routes (mounted at /api/v1/ by siamweb/api_urls.py): normalize, what the
product vouches for, and its auto-coding policy."""

from __future__ import annotations

from django.urls import path

from models_app.serving.api import NormalizeApi
from models_app.serving.api_vouching import AutoCodingApi, TaxonomyVouchingApi

urlpatterns = [
    path("taxonomies/<slug:slug>/normalize", NormalizeApi.as_view(), name="api-normalize"),
    path("taxonomies/<slug:slug>/vouching", TaxonomyVouchingApi.as_view(), name="api-vouching"),
    path("taxonomies/<slug:slug>/auto-coding", AutoCodingApi.as_view(), name="api-auto-coding"),
]
