"""REST API, version 1 (mounted at /api/v1/). Every endpoint needs a token or a session."""

from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated

from siamweb.web.api import ApiNotFoundApi

# Each area declares its own routes beside its API; the project only mounts them, and the
# schema (/api/v1/schema) lists them all. Serving's first: normalize is the busiest route, and
# Django tries the patterns in order.
urlpatterns = [
    path("", include("models_app.serving.api_urls")),
    path("", include("annotations.urls.api")),
    path("", include("models_app.training.api_urls")),
    path("", include("models_app.bulk.api_urls")),
    # the OpenAPI description and its docs page (Swagger UI from static files, no CDN)
    path(
        "schema",
        SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
        name="api-schema",
    ),
    path(
        "docs",
        # Split: Swagger UI's start-up script is served from this address too (?script), not
        # inlined in the page, which the Content-Security-Policy would refuse to run.
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema",
            permission_classes=[IsAuthenticated],
            # Swagger UI with a link back to the app above it.
            template_name="api_docs.html",
        ),
        name="api-docs",
    ),
    # Last: any other path under the API is a JSON 404, not Django's HTML page.
    re_path(r"", ApiNotFoundApi.as_view(), name="api-not-found"),
]
