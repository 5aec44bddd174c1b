from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from annotations.views import account as views_account
from annotations.views import site as views_site

urlpatterns = [
    path("", views_site.home, name="home"),
    path("healthz", views_site.healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page says: point them at the icon.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("accounts/login/", views_account.SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/token/", views_account.api_token, name="api-token"),
    path("", include("annotations.urls.review")),
    path("taxonomies/", include("annotations.urls.taxonomy")),
    path("", include("annotations.urls.inputs")),
    path("audit/", include("annotations.urls.audit")),
    path("models/", include("models_app.training.urls")),
    path("bulk/", include("models_app.bulk.urls")),
    path("api/v1/", include("siamweb.api_urls")),
    path("admin/", admin.site.urls),
]
